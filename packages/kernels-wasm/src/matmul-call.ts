import type { KernelRuntime } from "./kernel-runtime.js";
import type { KernelName } from "./kernel-names.js";

/** Storage dtypes of the matmul entry points: A, B and bias in one of them, C in it or f32; sums in f32. */
export type MatmulDType = "f32" | "bf16" | "f16";

const ENTRY: Record<MatmulDType, KernelName> = { f32: "kiln_matmul_f32", bf16: "kiln_matmul_bf16", f16: "kiln_matmul_f16" };

/**
 * One matmul on buffers already in linear memory (byte offsets), mirroring
 * MatmulArgs in csrc/matmul_gemm.h:
 *   C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias,  i < batch
 * op(A) is (m, k): A stored (m, k), or (k, m) when transA, its rows lda apart
 * (default k, or m when transA); op(B) is (k, n): B stored (k, n), or (n, k)
 * when transB; C is (m, n). Strides are in elements.
 * A, B and bias are in `dtype` (default f32); C is in `cDtype`: `dtype` (the
 * default) or, for a 16-bit `dtype`, f32. A 16-bit C is rounded once; an f32 C
 * is read and written without rounding.
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
  /** Elements between A's stored rows (default: k, or m when transA). */
  lda?: number;
  transA: boolean;
  transB: boolean;
  accumulate: boolean;
  alpha: number;
  dtype?: MatmulDType;
  cDtype?: MatmulDType;
}

/** Index (in 4-byte words) of each field of MatmulArgs in csrc/matmul_gemm.h. */
const FIELD = {
  m: 0, n: 1, k: 2, batch: 3, a: 4, b: 5, c: 6, bias: 7,
  strideA: 8, strideB: 9, strideC: 10, transA: 11, transB: 12, accumulate: 13,
  alpha: 14, scratch: 15, scratchStride: 16, cF32: 17, lda: 21, tickets: 32, packed: 48, done: 49, sleepers: 50,
} as const;

const INT32_MAX = 0x7fffffff;

function checkDim(name: string, v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > INT32_MAX) throw new RangeError(`matmul: ${name} must be an integer in [0, 2^31), got ${v}`);
}

export function writeMatmulArgs(rt: KernelRuntime, call: MatmulCall): void {
  checkDim("m", call.m);
  checkDim("n", call.n);
  checkDim("k", call.k);
  checkDim("batch", call.batch);
  checkDim("strideA", call.strideA);
  checkDim("strideB", call.strideB);
  checkDim("strideC", call.strideC);
  const lda = call.lda ?? (call.transA ? call.m : call.k);
  checkDim("lda", lda);
  const dtype = call.dtype ?? "f32";
  const cDtype = call.cDtype ?? dtype;
  if (cDtype !== dtype && cDtype !== "f32") throw new RangeError(`matmul: cDtype must be f32 or the dtype (${dtype}), got ${cDtype}`);
  const { u32, f32 } = rt.argsViews();
  u32[FIELD.m] = call.m;
  u32[FIELD.n] = call.n;
  u32[FIELD.k] = call.k;
  u32[FIELD.batch] = call.batch;
  u32[FIELD.a] = call.a;
  u32[FIELD.b] = call.b;
  u32[FIELD.c] = call.c;
  u32[FIELD.bias] = call.bias;
  u32[FIELD.strideA] = call.strideA;
  u32[FIELD.strideB] = call.strideB;
  u32[FIELD.strideC] = call.strideC;
  u32[FIELD.lda] = lda;
  u32[FIELD.transA] = call.transA ? 1 : 0;
  u32[FIELD.transB] = call.transB ? 1 : 0;
  u32[FIELD.accumulate] = call.accumulate ? 1 : 0;
  f32[FIELD.alpha] = call.alpha;
  u32[FIELD.scratch] = rt.matmulScratch;
  u32[FIELD.scratchStride] = rt.matmulScratchStride;
  u32[FIELD.cF32] = cDtype === "f32" ? 1 : 0;
  // The threads of one call count the work items handed out, B panel pieces packed, blocks of C
  // done and threads asleep here, from zero.
  u32[FIELD.tickets] = 0;
  u32[FIELD.packed] = 0;
  u32[FIELD.done] = 0;
  u32[FIELD.sleepers] = 0;
}

/** Threads worth waking for `flops` of work. */
export function threadsFor(flops: number, available: number, minFlopsPerThread: number, maxThreads?: number): number {
  const cap = Math.min(available, maxThreads ?? available);
  if (minFlopsPerThread <= 0) return cap;
  return Math.max(1, Math.min(cap, Math.floor(flops / minFlopsPerThread)));
}

/** Threads a matmul wakes: one per minFlopsPerThread of its work, at most `maxThreads` and the pool's. */
export function matmulThreads(rt: KernelRuntime, call: MatmulCall, maxThreads?: number): number {
  return threadsFor(2 * call.m * call.n * call.k * call.batch, rt.info.threads, rt.info.minFlopsPerThread, maxThreads);
}

/** Runs one matmul on the runtime's pool with the WebAssembly kernel; `maxThreads` caps the threads used. */
export function runMatmul(rt: KernelRuntime, call: MatmulCall, maxThreads?: number): void {
  writeMatmulArgs(rt, call);
  rt.run(ENTRY[call.dtype ?? "f32"], matmulThreads(rt, call, maxThreads));
}
