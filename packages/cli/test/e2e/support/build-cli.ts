// Vitest global setup: the end-to-end tests spawn the built CLI, so build it
// (and the packages it depends on) first. turbo skips the work when nothing
// changed, and rebuilds dist when a source file is newer than its last build.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { KILN_BIN, REPO_ROOT } from "./paths.js";

export default function buildCli(): void {
  const turbo = path.join(REPO_ROOT, "node_modules", ".bin", "turbo");
  const started = performance.now();
  const r = spawnSync(turbo, ["run", "build", "--filter=@kiln/cli...", "--output-logs=errors-only"], {
    cwd: REPO_ROOT,
    env: { ...process.env, TURBO_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" },
    encoding: "utf8",
  });
  if (r.error || r.status !== 0) {
    throw new Error(`building @kiln/cli for the end-to-end tests failed (exit ${r.status ?? r.error?.message}):\n${r.stdout}\n${r.stderr}`);
  }
  if (!existsSync(KILN_BIN)) throw new Error(`the build finished but ${KILN_BIN} is missing`);
  const seconds = (performance.now() - started) / 1000;
  if (seconds > 5) console.log(`built @kiln/cli for the end-to-end tests in ${seconds.toFixed(1)} s`);
}
