import os from "node:os";
import path from "node:path";

/** kiln's cache folder: $XDG_CACHE_HOME/kiln or ~/.cache/kiln (the built-in corpus, the CPU's measured peak). */
export function kilnCacheDir(): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "kiln");
}
