import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, require, stridedExtent, wideDtype } from "./spec.js";
import { type SsdScanDims, checkScanDims, ssdChunks, ssdRowStrides, ssdStateElements } from "./ssd.js";

/*
 * Mamba3's scan ("Mamba-3: Improved Sequence Modeling Using State Space Principles"): the
 * trapezoidal recurrence with a data-dependent mix, per batch b and head h (group
 * g = floor(h / (heads / groups)) shares the normalised B and C rows among its heads):
 *   Δ_t = softplus(dtRaw[b,t,h] + dtBias[h])      λ_t = sigmoid(lambdaRaw[b,t,h])
 *   A   = -exp(aLog[h])                           α_t = exp(Δ_t A)
 *   β_t = (1 - λ_t) Δ_t α_t                       γ_t = λ_t Δ_t
 *   B̂_t = B[b,t,g,:] + bBias[h,:]                 Ĉ_t = C[b,t,g,:] + cBias[h,:]
 *   B̄_t = R(φ_t) B̂_t, C̄_t = R(φ_t) Ĉ_t with φ_{t,k} = Σ_{r<=t} Δ_r theta[b,r,h,k]: the state
 *         as N/2 (real, imaginary) pairs (2k, 2k+1), each turned by its angle
 *         (re' = re cos φ - im sin φ, im' = re sin φ + im cos φ); without theta, R = 1
 *   S_t = α_t S_{t-1} + β_t x_{t-1} B̄_{t-1}^T + γ_t x_t B̄_t^T      S: (headDim, stateSize),
 *         S_{-1} = 0 and no β term at t = 0
 *   y_t = S_t C̄_t + D[h] x_t
 * Backends may carry G_t = S_t + μ_t x_t B̄_t^T instead, μ_t = (1 - λ_{t+1}) Δ_{t+1} (0 past
 * the end): G_t = α_t G_{t-1} + (γ_t + μ_t) x_t B̄_t^T and y_t = G_t C̄_t - μ_t (C̄_t·B̄_t) x_t + D x_t,
 * a Mamba2-style scan with one decay and one input weight per token, computed chunk by chunk
 * (chunkSize tokens). The oracle runs the recurrence above. Sums in f32.
 *
 * Layouts: x (batch, seqLen, heads·headDim) rows xRowStride apart; dtRaw (batch, seqLen, heads)
 * rows dtRowStride apart; B and C (batch, seqLen, groups·stateSize) rows bcRowStride apart
 * (slices of wider projections, the operand's offset picking each); lambdaRaw (batch, seqLen,
 * heads) and theta (batch, seqLen, heads·stateSize/2) dense; bBias, cBias (heads, stateSize);
 * dtBias, aLog, D (heads); y dense (batch, seqLen, heads·headDim). theta is optional: without
 * it there is no rotation; with it stateSize must be even.
 * states: f32 (batch, heads, chunks, headDim, stateSize), G entering each chunk c,
 * G_{cQ-1} (zero for chunk 0), written by the forward and read by the backward.
 */
/** Mamba3's scan has Mamba2's dimensions, row strides and chunking (SsdScanDims). */
export type Mamba3ScanDims = SsdScanDims;

interface Mamba3ScanInputs extends Mamba3ScanDims {
  x: Operand;
  dt: Operand;
  lambda: Operand;
  theta?: Operand;
  B: Operand;
  C: Operand;
  bBias: Operand;
  cBias: Operand;
  dtBias: Operand;
  aLog: Operand;
  D: Operand;
  dtype: FloatDType;
}

export interface Mamba3ScanForwardArgs extends Mamba3ScanInputs {
  y: Operand;
  states: Operand;
}

/**
 * mamba3ScanBackward, the forward's inputs and states, dY dense like y:
 *   dX, dDt, dLambda, dTheta (with theta), dB, dC: overwritten, each laid out like its input
 *     (gaps between rows not written, so dX, dB and dC may be slices of one buffer). dDt and
 *     dLambda are the gradients of the raw inputs (softplus' and sigmoid's derivatives
 *     included); dB and dC sum the heads of their group.
 *   dBBias, dCBias (heads, stateSize), dDtBias, dALog, dD (heads): accumulate, summed over
 *     batch and time in f32 in a fixed order and added once: the same bits on every call.
 */
export interface Mamba3ScanBackwardArgs extends Mamba3ScanInputs {
  dY: Operand;
  states: Operand;
  dX: Operand;
  dDt: Operand;
  dLambda: Operand;
  dTheta?: Operand;
  dB: Operand;
  dC: Operand;
  dBBias: Operand;
  dCBias: Operand;
  dDtBias: Operand;
  dALog: Operand;
  dD: Operand;
  /** Dtype of the accumulated parameter gradients: `dtype` (default) or f32 (mixed precision). */
  gradDtype?: FloatDType;
}

export const mamba3RowStrides = ssdRowStrides;
export const mamba3Chunks = ssdChunks;
export const mamba3StateElements = ssdStateElements;

/** Whether the scan rotates B and C (theta given). */
export const mamba3Rotates = (a: { theta?: Operand }): boolean => a.theta !== undefined;

function checkMamba3(name: string, a: Mamba3ScanInputs): void {
  checkScanDims(name, a);
  require(name, !mamba3Rotates(a) || a.stateSize % 2 === 0, `stateSize must be even to rotate B and C as (real, imaginary) pairs, got ${a.stateSize}`);
}

/** The inputs both kernels read, in a fixed order. */
function inputOperands(a: Mamba3ScanInputs) {
  const rows = a.batch * a.seqLen;
  const s = mamba3RowStrides(a);
  const N = a.stateSize;
  return [
    operand("x", "in", a.dtype, stridedExtent(rows, a.heads * a.headDim, s.x), { strided: true }),
    operand("dt", "in", a.dtype, stridedExtent(rows, a.heads, s.dt), { strided: true, init: { kind: "uniform", lo: -4, hi: 1 } }),
    operand("lambda", "in", a.dtype, rows * a.heads, { init: { kind: "uniform", lo: -4, hi: 4 } }),
    operand("theta", "in", a.dtype, (rows * a.heads * N) >> 1, { optional: true, init: { kind: "uniform", lo: -0.5, hi: 0.5 } }),
    operand("B", "in", a.dtype, stridedExtent(rows, a.groups * N, s.bc), { strided: true }),
    operand("C", "in", a.dtype, stridedExtent(rows, a.groups * N, s.bc), { strided: true }),
    operand("bBias", "in", a.dtype, a.heads * N),
    operand("cBias", "in", a.dtype, a.heads * N),
    operand("dtBias", "in", a.dtype, a.heads, { init: { kind: "uniform", lo: -1, hi: 0.5 } }),
    operand("aLog", "in", a.dtype, a.heads, { init: { kind: "uniform", lo: -1, hi: 1.5 } }),
    operand("D", "in", a.dtype, a.heads),
  ];
}

/** FLOPs of the chunked form: per (b, h, chunk) C·B and the mixing inside the chunk, the carried state in and out. */
function mamba3Flops(a: Mamba3ScanDims): number {
  const Q = Math.min(a.chunkSize, a.seqLen);
  const perToken = Q * (a.stateSize + a.headDim) + 4 * a.headDim * a.stateSize + 8 * a.stateSize;
  return 2 * a.batch * a.heads * a.seqLen * perToken;
}

export const mamba3ScanForwardSpec: KernelSpec<Mamba3ScanForwardArgs> = {
  name: "mamba3ScanForward",
  operands: (a) => [
    ...inputOperands(a),
    operand("y", "out", a.dtype, a.batch * a.seqLen * a.heads * a.headDim),
    operand("states", "out", "f32", mamba3StateElements(a)),
  ],
  check: (a) => checkMamba3("mamba3ScanForward", a),
  flops: mamba3Flops,
};

export const mamba3ScanBackwardSpec: KernelSpec<Mamba3ScanBackwardArgs> = {
  name: "mamba3ScanBackward",
  operands: (a) => {
    const rows = a.batch * a.seqLen;
    const s = mamba3RowStrides(a);
    const N = a.stateSize;
    const grad = wideDtype(a.dtype, a.gradDtype);
    return [
      operand("dY", "in", a.dtype, rows * a.heads * a.headDim),
      ...inputOperands(a),
      operand("states", "in", "f32", mamba3StateElements(a)),
      operand("dX", "out", a.dtype, stridedExtent(rows, a.heads * a.headDim, s.x), { strided: true }),
      operand("dDt", "out", a.dtype, stridedExtent(rows, a.heads, s.dt), { strided: true }),
      operand("dLambda", "out", a.dtype, rows * a.heads),
      operand("dTheta", "out", a.dtype, (rows * a.heads * N) >> 1, { optional: true }),
      operand("dB", "out", a.dtype, stridedExtent(rows, a.groups * N, s.bc), { strided: true }),
      operand("dC", "out", a.dtype, stridedExtent(rows, a.groups * N, s.bc), { strided: true }),
      operand("dBBias", "inout", grad, a.heads * N),
      operand("dCBias", "inout", grad, a.heads * N),
      operand("dDtBias", "inout", grad, a.heads),
      operand("dALog", "inout", grad, a.heads),
      operand("dD", "inout", grad, a.heads),
    ];
  },
  check: (a) => {
    checkMamba3("mamba3ScanBackward", a);
    require("mamba3ScanBackward", (a.theta === undefined) === (a.dTheta === undefined), "dTheta must be given exactly when theta is");
    checkWideDtype("mamba3ScanBackward", "gradDtype", a.dtype, a.gradDtype);
  },
  flops: (a) => 2 * mamba3Flops(a),
};
