import { type MatmulArgs, matmulStrides } from "@kiln/contract";

/**
 * Shape and flags of a matmul: the contract's MatmulArgs without its buffers and
 * dtypes (every operand is f32 here; see MatmulArgs in @kiln/contract for the math
 * and layouts), plus a thread cap.
 */
export type MatmulOptions = Omit<MatmulArgs, "a" | "b" | "c" | "bias" | "dtype" | "cDtype"> & {
  /** Use at most this many threads for this call. */
  threads?: number;
};

export interface ResolvedMatmulShape {
  m: number;
  n: number;
  k: number;
  batch: number;
  strideA: number;
  strideB: number;
  strideC: number;
  /** Elements between A's stored rows, A's stored row length, and the elements one batch item of A spans. */
  lda: number;
  aCols: number;
  aSpan: number;
}

/** Fills defaults and checks dims; throws RangeError naming the bad field. */
export function resolveMatmulShape(o: MatmulOptions): ResolvedMatmulShape {
  const shape = { m: o.m, n: o.n, k: o.k, ...matmulStrides(o) };
  for (const key of ["m", "n", "k", "batch"] as const) {
    if (!Number.isInteger(shape[key]) || shape[key] < 1) throw new RangeError(`matmul: ${key} must be a positive integer, got ${shape[key]}`);
  }
  for (const key of ["strideA", "strideB", "strideC"] as const) {
    if (!Number.isInteger(shape[key]) || shape[key] < 0) throw new RangeError(`matmul: ${key} must be a non-negative integer, got ${shape[key]}`);
  }
  if (shape.batch > 1 && shape.strideC < shape.m * shape.n) throw new RangeError("matmul: strideC must be >= m*n so batch items do not overlap");
  if (!Number.isInteger(shape.lda) || shape.lda < shape.aCols) throw new RangeError(`matmul: lda must be an integer >= A's stored row length ${shape.aCols} (${o.transA ? "m" : "k"}), got ${shape.lda}`);
  return shape;
}

/** Elements each operand spans, strides included. */
export function matmulExtents(s: ResolvedMatmulShape): { a: number; b: number; c: number; bias: number } {
  const ext = (stride: number, size: number) => (s.batch - 1) * stride + size;
  return { a: ext(s.strideA, s.aSpan), b: ext(s.strideB, s.k * s.n), c: ext(s.strideC, s.m * s.n), bias: s.n };
}
