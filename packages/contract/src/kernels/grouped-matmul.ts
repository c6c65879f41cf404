import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, wideDtype } from "./spec.js";

/**
 * groupedMatmul: rows of A split into `groups` runs by offsets (i32, groups+1,
 * nondecreasing, offsets[0] = 0, offsets[groups] = rows; a group may be empty).
 * For each row r of group g:
 *   C[r, :] = (accumulate ? C[r, :] : 0) + A[r, :] @ op(B_g)
 * A (rows, k); B holds `groups` matrices, B_g at g*k*n: (k, n), or (n, k) when transB
 * (one torch.nn.Linear weight per expert); C (rows, n). Products accumulate in f32.
 * The experts' matmuls of a mixture-of-experts layer, rows sorted by expert.
 */
export interface GroupedMatmulArgs {
  a: Operand;
  b: Operand;
  offsets: Operand;
  c: Operand;
  rows: number;
  n: number;
  k: number;
  groups: number;
  transB?: boolean;
  accumulate?: boolean;
  dtype: FloatDType;
}

export const groupedMatmulSpec: KernelSpec<GroupedMatmulArgs> = {
  name: "groupedMatmul",
  operands: (a) => [
    operand("a", "in", a.dtype, a.rows * a.k),
    operand("b", "in", a.dtype, a.groups * a.k * a.n),
    operand("offsets", "in", "i32", a.groups + 1, { init: { kind: "offsets", total: a.rows } }),
    operand("c", a.accumulate ? "inout" : "out", a.dtype, a.rows * a.n),
  ],
  check: (a) => positiveInts("groupedMatmul", { rows: a.rows, n: a.n, k: a.k, groups: a.groups }),
  flops: (a) => 2 * a.rows * a.n * a.k,
};

/**
 * groupedMatmulWeightGrad: for each group g, dB_g += dC_g^T @ A_g, where A_g and dC_g are
 * group g's rows of A (rows, k) and dC (rows, n); dB_g (n, k) at g*n*k (the transB layout).
 * Accumulates, like every parameter gradient, in `gradDtype` (`dtype` or f32); an empty
 * group leaves dB_g as it is.
 */
export interface GroupedMatmulWeightGradArgs {
  a: Operand;
  dC: Operand;
  offsets: Operand;
  dB: Operand;
  rows: number;
  n: number;
  k: number;
  groups: number;
  dtype: FloatDType;
  /** Dtype of the parameter gradients written here: `dtype` (default) or f32 (mixed precision). */
  gradDtype?: FloatDType;
}

export const groupedMatmulWeightGradSpec: KernelSpec<GroupedMatmulWeightGradArgs> = {
  name: "groupedMatmulWeightGrad",
  operands: (a) => [
    operand("a", "in", a.dtype, a.rows * a.k),
    operand("dC", "in", a.dtype, a.rows * a.n),
    operand("offsets", "in", "i32", a.groups + 1, { init: { kind: "offsets", total: a.rows } }),
    operand("dB", "inout", wideDtype(a.dtype, a.gradDtype), a.groups * a.n * a.k),
  ],
  check: (a) => {
    positiveInts("groupedMatmulWeightGrad", { rows: a.rows, n: a.n, k: a.k, groups: a.groups });
    checkWideDtype("groupedMatmulWeightGrad", "gradDtype", a.dtype, a.gradDtype);
  },
  flops: (a) => 2 * a.rows * a.n * a.k,
};
