import type { KernelRuntime } from "./kernel-runtime.js";

export interface CeilingResult {
  threads: number;
  seconds: number;
  flops: number;
  gflops: number;
}

/**
 * Register-only f32x4 multiply-add throughput (csrc/ceiling.c) on `threads`
 * threads: the upper bound for any kernel of this build. Each thread runs
 * `iterations` rounds of its chains.
 */
export function measureCeiling(rt: KernelRuntime, iterations: number, threads: number): CeilingResult {
  return timeCeilingLoop(rt, "kiln_ceiling_madd", iterations, threads, rt.exports.kiln_ceiling_chains() * 8);
}

/**
 * The native kernels' register-only fused multiply-add throughput (the addon's own loop, on
 * the instruction set they run) on `threads` threads of the pool: the ceiling of the
 * kernels that run natively. Throws when the runtime runs none.
 */
export function measureNativeCeiling(rt: KernelRuntime, iterations: number, threads: number): CeilingResult {
  const native = rt.native;
  if (!native) throw new Error(`the native kernels are not running (${rt.info.native.reason ?? "unknown reason"})`);
  return timeCeilingLoop(rt, "kiln_native_ceiling", iterations, threads, native.kernels.ceilingFlopsPerIteration);
}

/** Runs a ceiling loop (args: iterations, then an out pointer of a slot per thread) on up to `threads` threads and times it. */
function timeCeilingLoop(rt: KernelRuntime, entry: Parameters<KernelRuntime["run"]>[0], iterations: number, threads: number, flopsPerIteration: number): CeilingResult {
  const n = Math.max(1, Math.min(threads, rt.info.threads));
  const out = rt.heap.alloc(4 * n);
  try {
    const view = new DataView(rt.memory.buffer, rt.argsPtr, 8);
    view.setInt32(0, iterations, true);
    view.setUint32(4, out, true);
    const t0 = performance.now();
    rt.run(entry, n);
    const seconds = (performance.now() - t0) / 1000;
    const flops = iterations * flopsPerIteration * n;
    return { threads: n, seconds, flops, gflops: flops / seconds / 1e9 };
  } finally {
    rt.heap.release(out);
  }
}
