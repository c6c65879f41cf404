import type { KernelRuntime } from "./kernel-runtime.js";

/**
 * One matmul on buffers already in linear memory (byte offsets), mirroring
 * MatmulArgs in csrc/matmul.c:
 *   C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias,  i < batch
 * op(A) is (m, k): A stored (m, k), or (k, m) when transA; op(B) is (k, n): B
 * stored (k, n), or (n, k) when transB; C is (m, n). Strides are in elements.
 */
export interface MatmulCall {
  m: number;
  n: number;
  k: number;
  batch: number;
  a: number;
  b: number;
  c: number;
  /** 0: no bias. */
  bias: number;
  strideA: number;
  strideB: number;
  strideC: number;
  transA: boolean;
  transB: boolean;
  accumulate: boolean;
  alpha: number;
}

/** Byte offsets of the fields of MatmulArgs (csrc/matmul.c); every field is 4 bytes. */
const FIELD = {
  m: 0, n: 4, k: 8, batch: 12, a: 16, b: 20, c: 24, bias: 28,
  strideA: 32, strideB: 36, strideC: 40, transA: 44, transB: 48, accumulate: 52,
  alpha: 56, scratch: 60, scratchStride: 64,
} as const;

const INT32_MAX = 0x7fffffff;

export function writeMatmulArgs(rt: KernelRuntime, call: MatmulCall): void {
  for (const key of ["m", "n", "k", "batch", "strideA", "strideB", "strideC"] as const) {
    const v = call[key];
    if (!Number.isInteger(v) || v < 0 || v > INT32_MAX) throw new RangeError(`matmul: ${key} must be an integer in [0, 2^31), got ${v}`);
  }
  const view = new DataView(rt.memory.buffer, rt.argsPtr, 68);
  view.setInt32(FIELD.m, call.m, true);
  view.setInt32(FIELD.n, call.n, true);
  view.setInt32(FIELD.k, call.k, true);
  view.setInt32(FIELD.batch, call.batch, true);
  view.setUint32(FIELD.a, call.a, true);
  view.setUint32(FIELD.b, call.b, true);
  view.setUint32(FIELD.c, call.c, true);
  view.setUint32(FIELD.bias, call.bias, true);
  view.setInt32(FIELD.strideA, call.strideA, true);
  view.setInt32(FIELD.strideB, call.strideB, true);
  view.setInt32(FIELD.strideC, call.strideC, true);
  view.setInt32(FIELD.transA, call.transA ? 1 : 0, true);
  view.setInt32(FIELD.transB, call.transB ? 1 : 0, true);
  view.setInt32(FIELD.accumulate, call.accumulate ? 1 : 0, true);
  view.setFloat32(FIELD.alpha, call.alpha, true);
  view.setUint32(FIELD.scratch, rt.matmulScratch, true);
  view.setUint32(FIELD.scratchStride, rt.matmulScratchStride, true);
}

/** Threads worth waking for `flops` of work. */
export function threadsFor(flops: number, available: number, minFlopsPerThread: number, maxThreads?: number): number {
  const cap = Math.min(available, maxThreads ?? available);
  if (minFlopsPerThread <= 0) return cap;
  return Math.max(1, Math.min(cap, Math.floor(flops / minFlopsPerThread)));
}

/** Runs one matmul on the runtime's pool; `maxThreads` caps the threads used. */
export function runMatmul(rt: KernelRuntime, call: MatmulCall, maxThreads?: number): void {
  writeMatmulArgs(rt, call);
  const flops = 2 * call.m * call.n * call.k * call.batch;
  rt.run("kiln_matmul_f32", threadsFor(flops, rt.info.threads, rt.info.minFlopsPerThread, maxThreads));
}
