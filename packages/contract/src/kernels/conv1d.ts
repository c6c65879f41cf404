import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, require, stridedExtent, wideDtype } from "./spec.js";

/** Longest convolution window the backends support (Mamba2 uses 4). */
export const CONV1D_MAX_KERNEL_SIZE = 16;

/**
 * conv1dCausalForward: Mamba2's short convolution, a causal depthwise 1-D convolution
 * over time, one filter of kernelSize taps per channel:
 *   x:      (batch, seqLen, channels), token rows `rowStride` elements apart
 *           (default channels; a larger stride reads x as a slice of a wider
 *           projection, the operand's element offset picking the slice)
 *   weight: (channels, kernelSize)   (PyTorch nn.Conv1d(groups=channels)'s (channels, 1, K) squeezed)
 *   bias:   (channels), optional
 *   out:    (batch, seqLen, channels), dense
 *   out[b, t, c] = bias[c] + sum_{j < K} weight[c, j] * x[b, t - (K-1) + j, c]
 * with x at times before 0 read as zero (left zero padding: out at t sees x at t-K+1..t).
 * This is PyTorch's F.conv1d(x.transpose(1, 2), weight.unsqueeze(1), bias,
 * padding=K-1, groups=channels)[..., :seqLen].transpose(1, 2). Sums in f32.
 * out must not overlap x.
 */
export interface Conv1dCausalForwardArgs {
  x: Operand;
  weight: Operand;
  bias?: Operand;
  out: Operand;
  batch: number;
  seqLen: number;
  channels: number;
  kernelSize: number;
  /** Elements between the starts of consecutive token rows of x; default channels. */
  rowStride?: number;
  dtype: FloatDType;
}

/**
 * conv1dCausalBackward, with x, weight and the dims as in the forward and dOut dense like out:
 *   dX[b, s, c]      = sum_{j < K, s + (K-1) - j < seqLen} weight[c, j] * dOut[b, s + (K-1) - j, c]
 *   dWeight[c, j]   += sum_{b, t >= (K-1) - j} dOut[b, t, c] * x[b, t - (K-1) + j, c]
 *   dBias[c]        += sum_{b, t} dOut[b, t, c]
 * dX is dense (batch, seqLen, channels) whatever x's rowStride, and overwritten; dWeight
 * and dBias accumulate (parameter gradients, as the norm kernels' dWeight, in `gradDtype`:
 * `dtype` or f32), summed in f32 and rounded once when added. Their sums are deterministic: the same inputs give the
 * same bits on every call (fixed-order partial sums, no float atomics). dBias is optional.
 */
export interface Conv1dCausalBackwardArgs {
  dOut: Operand;
  x: Operand;
  weight: Operand;
  dX: Operand;
  dWeight: Operand;
  dBias?: Operand;
  batch: number;
  seqLen: number;
  channels: number;
  kernelSize: number;
  /** x's row stride; default channels. dX is always dense. */
  rowStride?: number;
  dtype: FloatDType;
  /** Dtype of the parameter gradients written here: `dtype` (default) or f32 (mixed precision). */
  gradDtype?: FloatDType;
}

type Conv1dDims = Pick<Conv1dCausalForwardArgs, "batch" | "seqLen" | "channels" | "kernelSize" | "rowStride">;

/** x's row stride: rowStride, or channels when absent. */
export function conv1dRowStride(a: Conv1dDims): number {
  return a.rowStride ?? a.channels;
}

function checkConv1d(name: string, a: Conv1dDims): void {
  positiveInts(name, { batch: a.batch, seqLen: a.seqLen, channels: a.channels, kernelSize: a.kernelSize, rowStride: a.rowStride });
  require(name, a.kernelSize <= CONV1D_MAX_KERNEL_SIZE, `kernelSize must be at most ${CONV1D_MAX_KERNEL_SIZE}, got ${a.kernelSize}`);
  require(name, conv1dRowStride(a) >= a.channels, `rowStride must be >= channels (${a.channels}), got ${a.rowStride}`);
}

const xOperand = (a: Conv1dCausalForwardArgs | Conv1dCausalBackwardArgs) =>
  operand("x", "in", a.dtype, stridedExtent(a.batch * a.seqLen, a.channels, conv1dRowStride(a)), { strided: true });

export const conv1dCausalForwardSpec: KernelSpec<Conv1dCausalForwardArgs> = {
  name: "conv1dCausalForward",
  operands: (a) => [
    xOperand(a),
    operand("weight", "in", a.dtype, a.channels * a.kernelSize),
    operand("bias", "in", a.dtype, a.channels, { optional: true }),
    operand("out", "out", a.dtype, a.batch * a.seqLen * a.channels),
  ],
  check: (a) => checkConv1d("conv1dCausalForward", a),
  flops: (a) => 2 * a.batch * a.seqLen * a.channels * a.kernelSize,
};

export const conv1dCausalBackwardSpec: KernelSpec<Conv1dCausalBackwardArgs> = {
  name: "conv1dCausalBackward",
  operands: (a) => [
    operand("dOut", "in", a.dtype, a.batch * a.seqLen * a.channels),
    xOperand(a),
    operand("weight", "in", a.dtype, a.channels * a.kernelSize),
    operand("dX", "out", a.dtype, a.batch * a.seqLen * a.channels),
    operand("dWeight", "inout", wideDtype(a.dtype, a.gradDtype), a.channels * a.kernelSize),
    operand("dBias", "inout", wideDtype(a.dtype, a.gradDtype), a.channels, { optional: true }),
  ],
  check: (a) => {
    checkConv1d("conv1dCausalBackward", a);
    checkWideDtype("conv1dCausalBackward", "gradDtype", a.dtype, a.gradDtype);
  },
  flops: (a) => 4 * a.batch * a.seqLen * a.channels * a.kernelSize,
};
