// Builds the WebAssembly modules before the tests when they are missing or
// older than csrc/ (turbo builds first; this covers a bare `vitest run`).
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export default function buildKernels(): void {
  const script = fileURLToPath(new URL("../scripts/build-wasm.mjs", import.meta.url));
  execFileSync(process.execPath, [script, "--if-stale"], { stdio: "inherit" });
}
