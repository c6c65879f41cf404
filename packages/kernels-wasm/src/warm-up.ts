import type { KernelRuntime } from "./kernel-runtime.js";
import { runMatmul } from "./matmul-call.js";

/**
 * V8 first runs wasm in its baseline compiler (about a fifth of the speed
 * here) and swaps in optimised code for a function only after it has run for
 * a while, compiling in the background; a call already running never
 * switches. Calling the matmul on a small problem until its time drops (or
 * `budgetMs` passes) makes the first real call run optimised code. The
 * compiled code is shared with the worker threads.
 */
export function warmUpMatmul(rt: KernelRuntime, budgetMs = 150): { calls: number; optimised: boolean } {
  const m = 96;
  const n = 96;
  const k = 300;
  const a = rt.heap.alloc(4 * m * k);
  const b = rt.heap.alloc(4 * k * n);
  const c = rt.heap.alloc(4 * m * n);
  try {
    new Float32Array(rt.memory.buffer, a, m * k).fill(0.5);
    new Float32Array(rt.memory.buffer, b, k * n).fill(0.25);
    const call = {
      m, n, k, batch: 1, a, b, c, bias: 0, strideA: m * k, strideB: k * n, strideC: m * n,
      transA: false, transB: false, accumulate: false, alpha: 1,
    };
    // One thread runs the per-thread loop nest; several share each packed panel of B
    // (another function, csrc/matmul.c): warm up each path the pool will take.
    const paths = rt.info.threads > 1 ? [1, rt.info.threads] : [1];
    let calls = 0;
    let optimised = true;
    for (const threads of paths) {
      const path = warmUntilFaster((i) => {
        // Every layout path lives in the same function, so any call warms them all.
        call.transA = (i & 1) === 1;
        call.transB = (i & 2) === 2;
        runMatmul(rt, call, threads);
      }, budgetMs);
      calls += path.calls;
      optimised &&= path.optimised;
    }
    return { calls, optimised };
  } finally {
    rt.heap.release(a);
    rt.heap.release(b);
    rt.heap.release(c);
  }
}

/** Calls `run` (with the call's index) until a call takes under half the time of the second and third (or `budgetMs` passes). */
function warmUntilFaster(run: (call: number) => void, budgetMs: number): { calls: number; optimised: boolean } {
  const start = performance.now();
  // The first call also pays for lazy compilation and first-touch page faults: time from the second.
  let baseline = Infinity;
  let calls = 0;
  while (performance.now() - start < budgetMs) {
    const t0 = performance.now();
    run(calls);
    const t = performance.now() - t0;
    calls++;
    if (calls === 2 || calls === 3) baseline = Math.min(baseline, t);
    else if (calls > 3 && t < 0.5 * baseline) return { calls, optimised: true };
  }
  return { calls, optimised: false };
}
