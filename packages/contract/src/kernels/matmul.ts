import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, require, wideDtype } from "./spec.js";

/**
 * matmul: for each batch item i,
 *   C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
 * Row-major. op(A) is (m, k): A is stored (m, k), or (k, m) when transA, its
 * stored rows lda elements apart (default: k, or m when transA; at least that:
 * a matrix inside a wider one, such as the first columns of each row).
 * op(B) is (k, n): B is stored (k, n), or (n, k) when transB. C is (m, n).
 * Batch item i starts at i*strideA / i*strideB / i*strideC elements
 * (defaults: A's stored rows times lda, k*n, m*n; strideA or strideB 0
 * broadcasts one matrix).
 * bias (length n) is added to every row of every batch item.
 * A, B and bias are in `dtype`; products accumulate in f32. C is in `cDtype`: `dtype`
 * (the default) or f32 (16-bit operands summed into f32, as parameter gradients in
 * mixed precision: with accumulate, the f32 C is added to without a 16-bit rounding).
 * C must not overlap A, B or bias.
 */
export interface MatmulArgs {
  a: Operand;
  b: Operand;
  c: Operand;
  bias?: Operand;
  m: number;
  n: number;
  k: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  strideA?: number;
  strideB?: number;
  strideC?: number;
  /** Elements between A's stored rows (default: k, or m when transA). */
  lda?: number;
  alpha?: number;
  accumulate?: boolean;
  dtype: FloatDType;
  /** C's dtype: `dtype` (default) or f32. */
  cDtype?: FloatDType;
}

/**
 * Effective strides of a matmul call, defaults filled in: lda, A's stored rows (aRows:
 * k when transA, else m) and columns (aCols), the elements one batch item of A spans
 * (aSpan), and the batch strides.
 */
export function matmulStrides(args: Pick<MatmulArgs, "m" | "n" | "k" | "batch" | "strideA" | "strideB" | "strideC" | "lda" | "transA">) {
  const { m, n, k } = args;
  const aRows = args.transA ? k : m, aCols = args.transA ? m : k;
  const lda = args.lda ?? aCols;
  return {
    batch: args.batch ?? 1,
    lda,
    aRows,
    aCols,
    aSpan: (aRows - 1) * lda + aCols,
    strideA: args.strideA ?? aRows * lda,
    strideB: args.strideB ?? k * n,
    strideC: args.strideC ?? m * n,
  };
}

export const matmulSpec: KernelSpec<MatmulArgs> = {
  name: "matmul",
  operands(args) {
    const { m, n, k, dtype } = args;
    const s = matmulStrides(args);
    const ext = (stride: number, size: number) => (s.batch - 1) * stride + size;
    return [
      operand("a", "in", dtype, ext(s.strideA, s.aSpan)),
      operand("b", "in", dtype, ext(s.strideB, k * n)),
      operand("bias", "in", dtype, n, { optional: true }),
      operand("c", args.accumulate ? "inout" : "out", wideDtype(dtype, args.cDtype), ext(s.strideC, m * n)),
    ];
  },
  check(args) {
    const s = matmulStrides(args);
    positiveInts("matmul", { m: args.m, n: args.n, k: args.k, batch: s.batch });
    require("matmul", s.strideC >= args.m * args.n || s.batch === 1, "strideC must be >= m*n so batch items do not overlap");
    require("matmul", s.strideA >= 0 && s.strideB >= 0, "strideA and strideB must be >= 0");
    require("matmul", Number.isSafeInteger(s.lda) && s.lda >= s.aCols, `lda must be a whole number >= A's stored row length (${s.aCols}: ${args.transA ? "m, A being transposed" : "k"})`);
    checkWideDtype("matmul", "cDtype", args.dtype, args.cDtype);
  },
  flops: (args) => 2 * args.m * args.n * args.k * (args.batch ?? 1),
};

/**
 * sumRows: out[j] = (accumulate ? out[j] : 0) + sum_i x[i, j], x is (rows, cols) row-major.
 * The bias gradient of a linear layer. x in `dtype`, out in `gradDtype` (`dtype` or
 * f32, default `dtype`), sums in f32.
 */
export interface SumRowsArgs {
  x: Operand;
  out: Operand;
  rows: number;
  cols: number;
  accumulate?: boolean;
  dtype: FloatDType;
  /** out's dtype: `dtype` (default) or f32. */
  gradDtype?: FloatDType;
}

export const sumRowsSpec: KernelSpec<SumRowsArgs> = {
  name: "sumRows",
  operands: (a) => [
    operand("x", "in", a.dtype, a.rows * a.cols),
    operand("out", a.accumulate ? "inout" : "out", wideDtype(a.dtype, a.gradDtype), a.cols),
  ],
  check: (a) => {
    positiveInts("sumRows", { rows: a.rows, cols: a.cols });
    checkWideDtype("sumRows", "gradDtype", a.dtype, a.gradDtype);
  },
};
