import type { Backend } from "@kiln/contract";
import { runConformance } from "@kiln/contract/conformance/vitest";
import { describe } from "vitest";
import { createWasmBackend, type WasmBackendOptions } from "../src/index.js";
import { nativeIsas, nativeMatmulOnly, nativeSkipReason, withEnv } from "./support/native.js";

// The conformance suite with the matmul on the native kernels (every other kernel is the
// WebAssembly one, as users get the backend): every matmul case must run natively, or it
// fails. On 1 and 2 threads with the best instruction set, then the matmul cases with each
// other one this CPU runs (KILN_NATIVE_ISA=avx2 on an AVX-512 machine).

const skip = nativeSkipReason();
const isas = nativeIsas();

/** A backend on `isa` whose capabilities say so, and whose matmuls are checked to run natively. */
async function nativeBackend(isa: string, options: WasmBackendOptions): Promise<Backend> {
  const backend = await withEnv({ KILN_NATIVE_ISA: isa }, () => createWasmBackend({ measurePeak: false, ...options }));
  const native = backend.capabilities().device.native;
  if (native?.isa !== isa || !native.kernels.includes("matmul")) {
    backend.dispose();
    throw new Error(`expected the matmul on the native ${isa} kernels, capabilities say ${JSON.stringify(native)}`);
  }
  return nativeMatmulOnly(backend);
}

describe.skipIf(skip !== undefined)(`native kernels${skip ? ` (skipped: ${skip})` : ""}`, () => {
  const best = isas[0];
  runConformance(() => nativeBackend(best, { threads: 1 }), { name: `native ${best}, 1 thread` });
  runConformance(() => nativeBackend(best, { threads: 2, minFlopsPerThread: 0 }), { name: `native ${best}, 2 threads` });
  for (const isa of isas.slice(1)) {
    const matmulOnly = { filter: (c: { kernel: string }) => c.kernel === "matmul" };
    runConformance(() => nativeBackend(isa, { threads: 1 }), { name: `native ${isa} (KILN_NATIVE_ISA), 1 thread`, ...matmulOnly });
    runConformance(() => nativeBackend(isa, { threads: 2, minFlopsPerThread: 0 }), { name: `native ${isa} (KILN_NATIVE_ISA), 2 threads`, ...matmulOnly });
  }
});
