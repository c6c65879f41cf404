import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, require, wideDtype } from "./spec.js";

/** The optional residual input and sum output of a norm forward. */
function residualOperands(a: { rows: number; dim: number; dtype: FloatDType }) {
  return [operand("residual", "in", a.dtype, a.rows * a.dim, { optional: true }), operand("sum", "out", a.dtype, a.rows * a.dim, { optional: true })];
}

function checkResidualPair(kernel: string, a: { residual?: Operand; sum?: Operand }): void {
  require(kernel, (a.residual === undefined) === (a.sum === undefined), "residual and sum go together: pass both (x + residual is normalized and written to sum) or neither");
}

/** out over x; sum over x or residual (each element is read before it is written). */
const RESIDUAL_FORWARD_ALIASES = [["out", "x"], ["sum", "x"], ["sum", "residual"]] as const;

/**
 * layernormForward, per row r of x (rows, dim):
 *   mean[r] = sum_j x[r,j] / dim
 *   rstd[r] = 1 / sqrt(sum_j (x[r,j]-mean[r])^2 / dim + eps)     (biased variance, as PyTorch)
 *   out[r,j] = (x[r,j]-mean[r]) * rstd[r] * weight[j] + bias[j]
 * mean and rstd are f32 (rows), saved for the backward pass. out may alias x.
 * With `residual` and `sum` (both or neither): the row normalized is the residual
 * stream's next value, sum = x + residual rounded to dtype (an `add` followed by the
 * norm, in one pass); sum may alias x or residual.
 */
export interface LayerNormForwardArgs {
  x: Operand;
  weight: Operand;
  bias?: Operand;
  out: Operand;
  mean: Operand;
  rstd: Operand;
  /** Added to x before the norm; the sum is written to `sum`. */
  residual?: Operand;
  sum?: Operand;
  rows: number;
  dim: number;
  eps: number;
  dtype: FloatDType;
}

export const layerNormForwardSpec: KernelSpec<LayerNormForwardArgs> = {
  name: "layerNormForward",
  operands: (a) => [
    operand("x", "in", a.dtype, a.rows * a.dim),
    operand("weight", "in", a.dtype, a.dim),
    operand("bias", "in", a.dtype, a.dim, { optional: true }),
    operand("out", "out", a.dtype, a.rows * a.dim),
    operand("mean", "out", "f32", a.rows),
    operand("rstd", "out", "f32", a.rows),
    ...residualOperands(a),
  ],
  check: (a) => {
    positiveInts("layerNormForward", { rows: a.rows, dim: a.dim });
    require("layerNormForward", a.eps > 0, `eps must be > 0, got ${a.eps}`);
    checkResidualPair("layerNormForward", a);
  },
  aliases: RESIDUAL_FORWARD_ALIASES,
};


/**
 * layerNormBackward, with xhat = (x - mean) * rstd and g = dOut * weight:
 *   dX[r,j]     = dResidual[r,j] + rstd[r] * (g[r,j] - mean_j(g[r,:]) - xhat[r,j] * mean_j(g[r,:] * xhat[r,:]))
 *   dWeight[j] += sum_r dOut[r,j] * xhat[r,j]
 *   dBias[j]   += sum_r dOut[r,j]
 * dX is overwritten (dResidual, when given, is the gradient x already has from its other
 * consumer, the residual stream: the sum is rounded once); dX may alias dResidual.
 * dWeight and dBias accumulate, in `gradDtype` (`dtype` or f32), and so does dXColSums:
 *   dXColSums[j] += sum_r dX[r,j]      (dX as stored: the bias gradient of a linear layer
 *                                       whose output's gradient dX is, in one pass with it)
 */
export interface LayerNormBackwardArgs {
  dOut: Operand;
  x: Operand;
  weight: Operand;
  mean: Operand;
  rstd: Operand;
  dX: Operand;
  dWeight: Operand;
  dBias?: Operand;
  /** Added to dX (the sum of x's gradients); absent: 0. */
  dResidual?: Operand;
  /** Accumulates dX's column sums (dim), in gradDtype. */
  dXColSums?: Operand;
  rows: number;
  dim: number;
  dtype: FloatDType;
  /** Dtype of the parameter gradients written here: `dtype` (default) or f32 (mixed precision). */
  gradDtype?: FloatDType;
}

export const layerNormBackwardSpec: KernelSpec<LayerNormBackwardArgs> = {
  name: "layerNormBackward",
  operands: (a) => [
    operand("dOut", "in", a.dtype, a.rows * a.dim),
    operand("x", "in", a.dtype, a.rows * a.dim),
    operand("weight", "in", a.dtype, a.dim),
    operand("mean", "in", "f32", a.rows),
    operand("rstd", "in", "f32", a.rows),
    operand("dX", "out", a.dtype, a.rows * a.dim),
    operand("dWeight", "inout", wideDtype(a.dtype, a.gradDtype), a.dim),
    operand("dBias", "inout", wideDtype(a.dtype, a.gradDtype), a.dim, { optional: true }),
    operand("dResidual", "in", a.dtype, a.rows * a.dim, { optional: true }),
    operand("dXColSums", "inout", wideDtype(a.dtype, a.gradDtype), a.dim, { optional: true }),
  ],
  check: (a) => {
    positiveInts("layerNormBackward", { rows: a.rows, dim: a.dim });
    checkWideDtype("layerNormBackward", "gradDtype", a.dtype, a.gradDtype);
  },
  aliases: [["dX", "dResidual"]],
};

/**
 * rmsNormForward, per row r of x (rows, dim), with w[j] = weight[j] + weightOffset:
 *   rstd[r] = 1 / sqrt(sum_j x[r,j]^2 / dim + eps);  out[r,j] = x[r,j] * rstd[r] * w[j]
 * rstd is f32 (rows). out may alias x. `residual` and `sum` as in layerNormForward.
 * weightOffset (default 0) is Gemma's norm: its weight stored as w - 1 (zeros scale by 1);
 * the sum is taken in f32.
 */
export interface RmsNormForwardArgs {
  x: Operand;
  weight: Operand;
  out: Operand;
  rstd: Operand;
  /** Added to x before the norm; the sum is written to `sum`. */
  residual?: Operand;
  sum?: Operand;
  rows: number;
  dim: number;
  eps: number;
  /** Added to every weight (Gemma: 1); default 0. */
  weightOffset?: number;
  dtype: FloatDType;
}

export const rmsNormForwardSpec: KernelSpec<RmsNormForwardArgs> = {
  name: "rmsNormForward",
  operands: (a) => [
    operand("x", "in", a.dtype, a.rows * a.dim),
    operand("weight", "in", a.dtype, a.dim),
    operand("out", "out", a.dtype, a.rows * a.dim),
    operand("rstd", "out", "f32", a.rows),
    ...residualOperands(a),
  ],
  check: (a) => {
    positiveInts("rmsNormForward", { rows: a.rows, dim: a.dim });
    require("rmsNormForward", a.eps > 0, `eps must be > 0, got ${a.eps}`);
    checkResidualPair("rmsNormForward", a);
  },
  aliases: RESIDUAL_FORWARD_ALIASES,
};

/**
 * rmsNormBackward, with xhat = x * rstd and g = dOut * (weight + weightOffset):
 *   dX[r,j]     = dResidual[r,j] + rstd[r] * (g[r,j] - xhat[r,j] * mean_j(g[r,:] * xhat[r,:]))
 *   dWeight[j] += sum_r dOut[r,j] * xhat[r,j]
 * dX is overwritten (dResidual as in layerNormBackward; dX may alias it); dWeight
 * accumulates, in `gradDtype` (`dtype` or f32), and dXColSums as in layerNormBackward.
 */
export interface RmsNormBackwardArgs {
  dOut: Operand;
  x: Operand;
  weight: Operand;
  rstd: Operand;
  dX: Operand;
  dWeight: Operand;
  /** Added to dX (the sum of x's gradients); absent: 0. */
  dResidual?: Operand;
  /** Accumulates dX's column sums (dim), in gradDtype. */
  dXColSums?: Operand;
  rows: number;
  dim: number;
  /** As in the forward; default 0. */
  weightOffset?: number;
  dtype: FloatDType;
  /** Dtype of the parameter gradients written here: `dtype` (default) or f32 (mixed precision). */
  gradDtype?: FloatDType;
}

export const rmsNormBackwardSpec: KernelSpec<RmsNormBackwardArgs> = {
  name: "rmsNormBackward",
  operands: (a) => [
    operand("dOut", "in", a.dtype, a.rows * a.dim),
    operand("x", "in", a.dtype, a.rows * a.dim),
    operand("weight", "in", a.dtype, a.dim),
    operand("rstd", "in", "f32", a.rows),
    operand("dX", "out", a.dtype, a.rows * a.dim),
    operand("dWeight", "inout", wideDtype(a.dtype, a.gradDtype), a.dim),
    operand("dResidual", "in", a.dtype, a.rows * a.dim, { optional: true }),
    operand("dXColSums", "inout", wideDtype(a.dtype, a.gradDtype), a.dim, { optional: true }),
  ],
  check: (a) => {
    positiveInts("rmsNormBackward", { rows: a.rows, dim: a.dim });
    checkWideDtype("rmsNormBackward", "gradDtype", a.dtype, a.gradDtype);
  },
  aliases: [["dX", "dResidual"]],
};
