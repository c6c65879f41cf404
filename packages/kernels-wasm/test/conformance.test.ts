import { runConformance } from "@kiln/contract/conformance/vitest";
import { createWasmBackend } from "../src/index.js";

// Every kernel x dtype x shape class against the reference oracle; kernels
// this backend does not declare are skipped with the reason in their names.
runConformance(() => createWasmBackend({ threads: 1, measurePeak: false }), { name: "wasm, 1 thread" });
runConformance(() => createWasmBackend({ threads: 2, minFlopsPerThread: 0, measurePeak: false }), { name: "wasm, 2 threads" });
