// Builds the WebAssembly modules and the native addon before the tests when they are
// missing or older than their sources (turbo builds first; this covers a bare `vitest run`).
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export default function buildKernels(): void {
  for (const name of ["build-wasm.mjs", "build-native.mjs"]) {
    const script = fileURLToPath(new URL(`../scripts/${name}`, import.meta.url));
    execFileSync(process.execPath, [script, "--if-stale"], { stdio: "inherit" });
  }
}
