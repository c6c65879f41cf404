import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, require, stridedExtent, wideDtype } from "./spec.js";

/*
 * Mamba2's selective state space scan (state space duality, "SSD"), per batch b and
 * head h (group g = floor(h / (heads / groups)) shares B and C among heads/groups heads):
 *   dt_t = softplus(dtRaw[b,t,h] + dtBias[h])        (softplus(v) = v when v > 20)
 *   A    = -exp(aLog[h])
 *   S_t  = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T       S: (headDim, stateSize), S_{-1} = 0
 *   y_t  = S_t C_t + D[h] x_t
 * with x_t = x[b,t,h,:] (headDim), B_t = B[b,t,g,:], C_t = C[b,t,g,:] (stateSize).
 * Backends compute it chunk by chunk (chunkSize tokens): inside a chunk the quadratic
 * ("attention-like") form with decays exp(Λ_t − Λ_s), Λ the running sum of dt·A, and
 * across chunks the carried state. The result does not depend on chunkSize beyond
 * rounding; the oracle runs the sequential recurrence above. Sums in f32.
 *
 * Layouts: x (batch, seqLen, heads·headDim) rows xRowStride apart; dtRaw (batch, seqLen,
 * heads) rows dtRowStride apart; B and C (batch, seqLen, groups·stateSize) rows
 * bcRowStride apart (each may be a slice of a wider projection, the operand's offset
 * picking it); dtBias, aLog, D: (heads); y dense (batch, seqLen, heads·headDim).
 * states: f32 (batch, heads, chunks, headDim, stateSize), the state entering each chunk
 * (S_{cQ−1}, zero for chunk 0), written by the forward and read by the backward.
 */
export interface SsdScanDims {
  batch: number;
  seqLen: number;
  heads: number;
  headDim: number;
  groups: number;
  stateSize: number;
  chunkSize: number;
  /** Elements between consecutive token rows of x (and dX); default heads·headDim. */
  xRowStride?: number;
  /** Elements between consecutive token rows of dtRaw (and dDt); default heads. */
  dtRowStride?: number;
  /** Elements between consecutive token rows of B and C (and dB, dC); default groups·stateSize. */
  bcRowStride?: number;
}

/** The scan's inputs, read by both kernels. */
interface SsdScanInputs extends SsdScanDims {
  x: Operand;
  dt: Operand;
  dtBias: Operand;
  aLog: Operand;
  B: Operand;
  C: Operand;
  D: Operand;
  dtype: FloatDType;
}

export interface SsdScanForwardArgs extends SsdScanInputs {
  y: Operand;
  states: Operand;
}

/**
 * ssdScanBackward, the forward's inputs and states, dY dense like y:
 *   dX, dDt, dB, dC: overwritten, each laid out like its input (same row stride; the
 *     gaps between rows are not written, so the four may be slices of one buffer).
 *     dDt is the gradient of dtRaw (softplus' derivative included); dB and dC sum the
 *     heads of their group.
 *   dDtBias, dALog, dD: (heads), accumulate (parameter gradients), summed over batch and
 *     time in f32 in a fixed order and added once: the same bits on every call.
 */
export interface SsdScanBackwardArgs extends SsdScanInputs {
  dY: Operand;
  states: Operand;
  dX: Operand;
  dDt: Operand;
  dB: Operand;
  dC: Operand;
  dDtBias: Operand;
  dALog: Operand;
  dD: Operand;
  /** Dtype of dDtBias, dALog and dD: `dtype` (default) or f32 (mixed precision). */
  gradDtype?: FloatDType;
}

/** Longest state (stateSize) and head (headDim) the backends support. */
export const SSD_MAX_STATE_SIZE = 256;
export const SSD_MAX_HEAD_DIM = 256;
/** Longest chunk the backends support. */
export const SSD_MAX_CHUNK_SIZE = 256;

export const ssdRowStrides = (a: SsdScanDims) => ({
  x: a.xRowStride ?? a.heads * a.headDim,
  dt: a.dtRowStride ?? a.heads,
  bc: a.bcRowStride ?? a.groups * a.stateSize,
});

/** Chunks of chunkSize tokens covering seqLen (the last may be shorter). */
export const ssdChunks = (a: SsdScanDims): number => Math.ceil(a.seqLen / a.chunkSize);

/** f32 elements of the saved chunk states. */
export const ssdStateElements = (a: SsdScanDims): number => a.batch * a.heads * ssdChunks(a) * a.headDim * a.stateSize;

/** The dimension and stride checks Mamba2's and Mamba3's scans share. */
export function checkScanDims(name: string, a: SsdScanDims): void {
  const { batch, seqLen, heads, headDim, groups, stateSize, chunkSize } = a;
  positiveInts(name, { batch, seqLen, heads, headDim, groups, stateSize, chunkSize });
  positiveInts(name, { xRowStride: a.xRowStride, dtRowStride: a.dtRowStride, bcRowStride: a.bcRowStride });
  require(name, heads % groups === 0, `heads (${heads}) must be a multiple of groups (${groups})`);
  require(name, stateSize <= SSD_MAX_STATE_SIZE, `stateSize must be at most ${SSD_MAX_STATE_SIZE}, got ${stateSize}`);
  require(name, headDim <= SSD_MAX_HEAD_DIM, `headDim must be at most ${SSD_MAX_HEAD_DIM}, got ${headDim}`);
  require(name, chunkSize <= SSD_MAX_CHUNK_SIZE, `chunkSize must be at most ${SSD_MAX_CHUNK_SIZE}, got ${chunkSize}`);
  const s = ssdRowStrides(a);
  require(name, s.x >= heads * headDim, `xRowStride must be >= heads·headDim (${heads * headDim}), got ${s.x}`);
  require(name, s.dt >= heads, `dtRowStride must be >= heads (${heads}), got ${s.dt}`);
  require(name, s.bc >= groups * stateSize, `bcRowStride must be >= groups·stateSize (${groups * stateSize}), got ${s.bc}`);
}

/** The strided inputs (or, with `grad`, their gradients: same layout, written). */
function scanOperands(a: SsdScanForwardArgs | SsdScanBackwardArgs, grad: boolean) {
  const rows = a.batch * a.seqLen;
  const s = ssdRowStrides(a);
  const role = grad ? "out" : "in";
  const key = (k: string) => (grad ? `d${k[0].toUpperCase()}${k.slice(1)}` : k);
  return [
    operand(key("x"), role, a.dtype, stridedExtent(rows, a.heads * a.headDim, s.x), { strided: true }),
    operand(key("dt"), role, a.dtype, stridedExtent(rows, a.heads, s.dt), { strided: true, ...(grad ? {} : { init: { kind: "uniform", lo: -4, hi: 1 } }) }),
    ...(grad ? [] : [operand("dtBias", "in", a.dtype, a.heads, { init: { kind: "uniform", lo: -1, hi: 0.5 } }), operand("aLog", "in", a.dtype, a.heads, { init: { kind: "uniform", lo: -1, hi: 1.5 } })]),
    operand(key("B"), role, a.dtype, stridedExtent(rows, a.groups * a.stateSize, s.bc), { strided: true }),
    operand(key("C"), role, a.dtype, stridedExtent(rows, a.groups * a.stateSize, s.bc), { strided: true }),
  ];
}

/** FLOPs of the chunked form: per (b, h, chunk) C·B and the mixing inside the chunk, the carried state in and out. */
function ssdFlops(a: SsdScanDims): number {
  const Q = Math.min(a.chunkSize, a.seqLen);
  const perToken = Q * (a.stateSize + a.headDim) + 4 * a.headDim * a.stateSize;
  return 2 * a.batch * a.heads * a.seqLen * perToken;
}

export const ssdScanForwardSpec: KernelSpec<SsdScanForwardArgs> = {
  name: "ssdScanForward",
  operands: (a) => [
    ...scanOperands(a, false),
    operand("D", "in", a.dtype, a.heads),
    operand("y", "out", a.dtype, a.batch * a.seqLen * a.heads * a.headDim),
    operand("states", "out", "f32", ssdStateElements(a)),
  ],
  check: (a) => checkScanDims("ssdScanForward", a),
  flops: ssdFlops,
};

export const ssdScanBackwardSpec: KernelSpec<SsdScanBackwardArgs> = {
  name: "ssdScanBackward",
  operands: (a) => [
    operand("dY", "in", a.dtype, a.batch * a.seqLen * a.heads * a.headDim),
    ...scanOperands(a, false),
    operand("D", "in", a.dtype, a.heads),
    operand("states", "in", "f32", ssdStateElements(a)),
    ...scanOperands(a, true),
    operand("dDtBias", "inout", wideDtype(a.dtype, a.gradDtype), a.heads),
    operand("dALog", "inout", wideDtype(a.dtype, a.gradDtype), a.heads),
    operand("dD", "inout", wideDtype(a.dtype, a.gradDtype), a.heads),
  ],
  check: (a) => {
    checkScanDims("ssdScanBackward", a);
    checkWideDtype("ssdScanBackward", "gradDtype", a.dtype, a.gradDtype);
  },
  flops: (a) => 2 * ssdFlops(a),
};
