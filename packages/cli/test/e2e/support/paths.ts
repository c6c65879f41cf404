import path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (five folders above this one). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../..");

/** The built CLI entry point the tests spawn. */
export const KILN_BIN = path.join(REPO_ROOT, "packages", "cli", "dist", "bin", "kiln.js");

/** Ready-made configs shipped in the repository. */
export const MODELS_DIR = path.join(REPO_ROOT, "models");
