/** Shape and flags of a matmul; see MatmulCall for the math and layouts. */
export interface MatmulOptions {
  m: number;
  n: number;
  k: number;
  /** Batch items (default 1). */
  batch?: number;
  /** A is stored (k, m) instead of (m, k). */
  transA?: boolean;
  /** B is stored (n, k) instead of (k, n). */
  transB?: boolean;
  /** Elements between batch items (defaults m*k, k*n, m*n; 0 broadcasts A or B). */
  strideA?: number;
  strideB?: number;
  strideC?: number;
  /** Scale of the product (default 1). */
  alpha?: number;
  /** Add into C instead of overwriting it. */
  accumulate?: boolean;
  /** Use at most this many threads for this call. */
  threads?: number;
}

export interface ResolvedMatmulShape {
  m: number;
  n: number;
  k: number;
  batch: number;
  strideA: number;
  strideB: number;
  strideC: number;
}

/** Fills defaults and checks dims; throws RangeError naming the bad field. */
export function resolveMatmulShape(o: MatmulOptions): ResolvedMatmulShape {
  const batch = o.batch ?? 1;
  const shape = {
    m: o.m,
    n: o.n,
    k: o.k,
    batch,
    strideA: o.strideA ?? o.m * o.k,
    strideB: o.strideB ?? o.k * o.n,
    strideC: o.strideC ?? o.m * o.n,
  };
  for (const key of ["m", "n", "k", "batch"] as const) {
    if (!Number.isInteger(shape[key]) || shape[key] < 1) throw new RangeError(`matmul: ${key} must be a positive integer, got ${shape[key]}`);
  }
  for (const key of ["strideA", "strideB", "strideC"] as const) {
    if (!Number.isInteger(shape[key]) || shape[key] < 0) throw new RangeError(`matmul: ${key} must be a non-negative integer, got ${shape[key]}`);
  }
  if (batch > 1 && shape.strideC < shape.m * shape.n) throw new RangeError("matmul: strideC must be >= m*n so batch items do not overlap");
  return shape;
}

/** Elements each operand spans, strides included. */
export function matmulExtents(s: ResolvedMatmulShape): { a: number; b: number; c: number; bias: number } {
  const ext = (stride: number, size: number) => (s.batch - 1) * stride + size;
  return { a: ext(s.strideA, s.m * s.k), b: ext(s.strideB, s.k * s.n), c: ext(s.strideC, s.m * s.n), bias: s.n };
}
