import {
  type AttentionDims,
  type DType,
  type FloatDType,
  type GateActivation,
  type KernelArgsMap,
  type KernelName,
  type Mamba3ScanDims,
  type OperandRange,
  type RopeScaling,
  type SsdScanDims,
  attentionLayout,
  conv1dRowStride,
  dropoutScale,
  dropoutThreshold,
  kernelSpecs,
  mamba3RowStrides,
  matmulStrides,
  ropeRowStride,
  ssdRowStrides,
  wideDtype,
} from "@kiln/contract";

/** Storage dtype codes of csrc/kiln_cuda.h (enum DType). */
const DTYPE_CODES: Record<DType, number> = { f32: 0, bf16: 1, f16: 2, i32: 3, u32: 4, u16: 5 };
/** A dtype's code in csrc/kiln_cuda.h (enum DType), as the addon reads it. */
export const dtypeCode = (d: DType) => DTYPE_CODES[d];
const code = dtypeCode;
const bit = (b: boolean | undefined) => (b ? 1 : 0);

/** A gradient-writing kernel's gradient dtype (the contract's cDtype / gradDtype; default the kernel's dtype), sent after its dtype. */
const gradCode = (a: { dtype: FloatDType }, chosen: FloatDType | undefined) => code(wideDtype(a.dtype, chosen));

/** swiGluForward / swiGluBackward after the dtype: the gate's activation, as csrc/activation.cu's GateActivation codes. */
const GATE_CODES: Record<GateActivation, number> = { silu: 0, gelu: 1 };

/** ssdScanForward / ssdScanBackward: batch, seqLen, heads, headDim, groups, stateSize, chunkSize, the three row strides, dtype. */
const ssdScalars = (a: SsdScanDims & { dtype: DType }) => {
  const s = ssdRowStrides(a);
  return [a.batch, a.seqLen, a.heads, a.headDim, a.groups, a.stateSize, a.chunkSize, s.x, s.dt, s.bc, code(a.dtype)];
};

/** mamba3ScanForward / mamba3ScanBackward: the same dimensions and row strides as the SSD scan's, then the dtype. */
const mamba3Scalars = (a: Mamba3ScanDims & { dtype: DType }) => {
  const s = mamba3RowStrides(a);
  return [a.batch, a.seqLen, a.heads, a.headDim, a.groups, a.stateSize, a.chunkSize, s.x, s.dt, s.bc, code(a.dtype)];
};

/** ropeForward / ropeBackward after the dtype: scaling kind (0 none, 1 linear, 2 llama3), factor, low and high frequency factors, original positions. */
const ropeScalingArgs = (sc: RopeScaling | undefined) =>
  !sc ? [0, 1, 1, 1, 1] : sc.type === "linear" ? [1, sc.factor, 1, 1, 1] : [2, sc.factor, sc.lowFreqFactor, sc.highFreqFactor, sc.originalMaxPositions];

/** attentionForward / attentionBackward: the dimensions, row strides and scale with defaults filled in, the dtype, then the window (at most seqLen). */
const attentionScalars = (a: AttentionDims & { dtype: DType }) => {
  const l = attentionLayout(a);
  return [a.batch, a.seqLen, a.heads, a.kvHeads, a.headDim, l.vHeadDim, l.qRowStride, l.kvRowStride, l.vRowStride, l.outRowStride, l.scale, code(a.dtype), l.window];
};

/**
 * Each kernel's scalars, in the order its launcher in csrc/<family>.cu reads them
 * (after the operand addresses, which come in the order of the kernel's spec).
 */
const SCALARS: { [K in KernelName]: (a: KernelArgsMap[K]) => number[] } = {
  matmul: (a) => {
    const s = matmulStrides(a);
    return [a.m, a.n, a.k, s.batch, bit(a.transA), bit(a.transB), s.strideA, s.strideB, s.strideC, a.alpha ?? 1, bit(a.accumulate), code(a.dtype), gradCode(a, a.cDtype), s.lda];
  },
  sumRows: (a) => [a.rows, a.cols, bit(a.accumulate), code(a.dtype), gradCode(a, a.gradDtype)],
  embeddingForward: (a) => [a.count, a.vocab, a.dim, code(a.dtype)],
  embeddingBackward: (a) => [a.count, a.vocab, a.dim, code(a.dtype), gradCode(a, a.gradDtype)],
  layerNormForward: (a) => [a.rows, a.dim, a.eps, code(a.dtype)],
  layerNormBackward: (a) => [a.rows, a.dim, code(a.dtype), gradCode(a, a.gradDtype)],
  rmsNormForward: (a) => [a.rows, a.dim, a.eps, code(a.dtype), a.weightOffset ?? 0],
  rmsNormBackward: (a) => [a.rows, a.dim, code(a.dtype), gradCode(a, a.gradDtype), a.weightOffset ?? 0],
  geluForward: (a) => [a.n, code(a.dtype)],
  geluBackward: (a) => [a.n, a.cols ?? 0, code(a.dtype), gradCode(a, a.gradDtype)],
  siluForward: (a) => [a.n, code(a.dtype)],
  siluBackward: (a) => [a.n, a.cols ?? 0, code(a.dtype), gradCode(a, a.gradDtype)],
  swiGluForward: (a) => [a.n, code(a.dtype), GATE_CODES[a.activation ?? "silu"]],
  swiGluBackward: (a) => [a.n, code(a.dtype), GATE_CODES[a.activation ?? "silu"]],
  ropeForward: (a) => [a.batch, a.seqLen, a.heads, a.headDim, ropeRowStride(a), a.posOffset ?? 0, a.theta, code(a.dtype), ...ropeScalingArgs(a.scaling)],
  ropeBackward: (a) => [a.batch, a.seqLen, a.heads, a.headDim, ropeRowStride(a), a.posOffset ?? 0, a.theta, code(a.dtype), ...ropeScalingArgs(a.scaling)],
  attentionForward: (a) => attentionScalars(a),
  attentionBackward: (a) => attentionScalars(a),
  crossEntropyForward: (a) => [a.rows, a.vocab, code(a.dtype), a.lossScale ?? 1],
  crossEntropyBackward: (a) => [a.rows, a.vocab, a.lossScale, code(a.dtype)],
  softmaxForward: (a) => [a.rows, a.dim, a.temperature ?? 1, code(a.dtype)],
  add: (a) => [a.n, code(a.dtype)],
  scale: (a) => [a.n, a.alpha, code(a.dtype)],
  dropout: (a) => [a.n, a.seed, dropoutThreshold(a.p), dropoutScale(a.p), code(a.dtype)],
  sum: (a) => [a.n, bit(a.accumulate), code(a.dtype)],
  sumSquares: (a) => [a.n, bit(a.accumulate), code(a.dtype)],
  adamW: (a) => [a.n, a.lr, a.beta1, a.beta2, a.eps, a.weightDecay, a.step, a.gradScale ?? 1, code(a.dtype), gradCode(a, a.gradDtype)],
  cast: (a) => [a.n, code(a.srcDtype), code(a.dstDtype)],
  fill: (a) => [a.n, a.value, code(a.dtype)],
  checkFinite: (a) => [a.n, code(a.dtype)],
  copyStrided: (a) => [a.batch, a.rows, a.cols, a.srcBatchStride, a.srcRowStride, a.dstBatchStride, a.dstRowStride, bit(a.accumulate), code(a.dtype)],
  conv1dCausalForward: (a) => [a.batch, a.seqLen, a.channels, a.kernelSize, conv1dRowStride(a), code(a.dtype)],
  conv1dCausalBackward: (a) => [a.batch, a.seqLen, a.channels, a.kernelSize, conv1dRowStride(a), code(a.dtype), gradCode(a, a.gradDtype)],
  ssdScanForward: (a) => ssdScalars(a),
  ssdScanBackward: (a) => [...ssdScalars(a), gradCode(a, a.gradDtype)],
  mamba3ScanForward: (a) => mamba3Scalars(a),
  mamba3ScanBackward: (a) => [...mamba3Scalars(a), gradCode(a, a.gradDtype)],
  moeRoute: (a) => [a.tokens, a.numExperts, a.topK, a.alpha, code(a.dtype)],
  moeRouteBackward: (a) => [a.tokens, a.numExperts, a.topK, a.alpha, a.auxScale, code(a.dtype)],
  moeDispatch: (a) => [a.tokens, a.topK, a.dim, code(a.dtype)],
  moeCombine: (a) => [a.tokens, a.topK, a.dim, bit(a.accumulate), code(a.dtype)],
  moeCombineScaleGrad: (a) => [a.tokens, a.topK, a.dim, code(a.dtype)],
  groupedMatmul: (a) => [a.rows, a.n, a.k, a.groups, bit(a.transB), bit(a.accumulate), code(a.dtype)],
  groupedMatmulWeightGrad: (a) => [a.rows, a.n, a.k, a.groups, code(a.dtype), gradCode(a, a.gradDtype)],
};

/** What the addon's launch() reads: operand addresses in spec order (0 when absent), then scalars. */
export function kernelCallValues<K extends KernelName>(name: K, args: KernelArgsMap[K], ranges: Record<string, OperandRange>): Float64Array {
  const operands = kernelSpecs[name].operands(args as never);
  const scalars = (SCALARS[name] as (a: KernelArgsMap[K]) => number[])(args);
  const values = new Float64Array(operands.length + scalars.length);
  operands.forEach((s, i) => (values[i] = ranges[s.key]?.ptr ?? 0));
  values.set(scalars, operands.length);
  return values;
}
