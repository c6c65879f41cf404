// One conformance run in the browser: creates the wasm backend, runs the
// conformance cases of the kernels it declares, and reports what it saw.
import { checkConformance } from "@kiln/contract/conformance";
import { createKernelRuntime, createWasmBackend } from "../../src/index.js";
import type { FailedCase, RunReport, RunRequest } from "./run-report.js";

const isolated = () => (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === true;

export async function runConformanceHere(request: RunRequest): Promise<RunReport> {
  const start = performance.now();
  const options = { threads: request.threads, minFlopsPerThread: request.minFlopsPerThread };
  // The backend does not expose the runtime's reasons; a bare runtime with the same options makes the same choices.
  const probe = await createKernelRuntime({ ...options, warmUp: false });
  const { simd, threads, sharedMemory, threadLimitReason } = probe.info;
  await probe.dispose();

  const backend = await createWasmBackend({ ...options, measurePeak: false });
  try {
    const caps = backend.capabilities();
    const declared = Object.entries(caps.kernelDTypes)
      .filter(([, dtypes]) => (dtypes as readonly string[]).length > 0)
      .map(([name]) => name);
    const wanted = declared.filter((k) => request.kernels?.includes(k) ?? true);
    const outcomes = await checkConformance(backend, { filter: (c) => wanted.includes(c.kernel) });
    const passedByKernel: Record<string, number> = {};
    const failed: FailedCase[] = [];
    let passed = 0;
    let skipped = 0;
    for (const o of outcomes) {
      if (o.status === "passed") {
        passed++;
        passedByKernel[o.case.kernel] = (passedByKernel[o.case.kernel] ?? 0) + 1;
      } else if (o.status === "failed") failed.push({ name: o.name, details: o.details });
      else skipped++;
    }
    return {
      pageIsolated: isolated(),
      runIsolated: isolated(),
      ranOn: request.on,
      device: { name: caps.device.name, parallelism: caps.device.parallelism, simd: caps.device.simd },
      runtime: { simd, threads, sharedMemory, ...(threadLimitReason ? { threadLimitReason } : {}) },
      declaredKernels: declared,
      passedByKernel,
      passed,
      skipped,
      failed,
      ms: Math.round(performance.now() - start),
    };
  } finally {
    backend.dispose();
  }
}
