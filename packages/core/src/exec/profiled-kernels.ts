import { type Backend, type KernelName, type Kernels } from "@kiln/contract";
import { type KernelRegion, type StepProfiler, describeKernelArgs, kernelCost } from "./step-profiler.js";

/**
 * The backend with every kernel timed through `profiler` as a call of `region`
 * (the trainer's own calls: gradient zeroing and sums, norm, AdamW). Memory
 * functions are the backend's own; it prepares no calls, so every call goes
 * through the timed kernels.
 */
export function withProfiledKernels(backend: Backend, profiler: StepProfiler, region: KernelRegion): Backend {
  const timed = {} as Record<KernelName, (args: never) => void>;
  for (const name of Object.keys(backend.kernels) as KernelName[]) {
    const run = backend.kernels[name] as (args: unknown) => void;
    timed[name] = (args: unknown) => {
      if (!profiler.recording) return run(args);
      profiler.time(() => run(args), name, region, kernelCost(name, args), describeKernelArgs(args as Record<string, unknown>));
    };
  }
  return Object.assign(Object.create(backend) as Backend, { kernels: timed as unknown as Kernels, prepare: undefined });
}
