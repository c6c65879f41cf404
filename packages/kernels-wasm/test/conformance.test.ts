import { runConformance } from "@kiln/contract/conformance/vitest";
import { createWasmBackend } from "../src/index.js";

// Every kernel x dtype x shape class against the reference oracle; kernels
// this backend does not declare are skipped with the reason in their names.
// Every kernel on WebAssembly here (native: false, as in a browser or with KILN_NATIVE=0);
// native-conformance.test.ts runs the suite again with the matmul on the native kernels.
runConformance(() => createWasmBackend({ threads: 1, measurePeak: false, native: false }), { name: "wasm, 1 thread" });
runConformance(() => createWasmBackend({ threads: 2, minFlopsPerThread: 0, measurePeak: false, native: false }), { name: "wasm, 2 threads" });
