import type { AdamWArgs } from "./adamw.js";
import { adamWSpec } from "./adamw.js";
import type { SwiGluBackwardArgs, SwiGluForwardArgs, UnaryBackwardArgs, UnaryForwardArgs } from "./activation.js";
import { geluBackwardSpec, geluForwardSpec, siluBackwardSpec, siluForwardSpec, swiGluBackwardSpec, swiGluForwardSpec } from "./activation.js";
import type { AttentionBackwardArgs, AttentionForwardArgs } from "./attention.js";
import { attentionBackwardSpec, attentionForwardSpec } from "./attention.js";
import type { CastArgs, CheckFiniteArgs, FillArgs } from "./convert.js";
import { castSpec, checkFiniteSpec, fillSpec } from "./convert.js";
import type { Conv1dCausalBackwardArgs, Conv1dCausalForwardArgs } from "./conv1d.js";
import { conv1dCausalBackwardSpec, conv1dCausalForwardSpec } from "./conv1d.js";
import type { CopyStridedArgs } from "./copy.js";
import { copyStridedSpec } from "./copy.js";
import type { CrossEntropyBackwardArgs, CrossEntropyForwardArgs, SoftmaxForwardArgs } from "./cross-entropy.js";
import { crossEntropyBackwardSpec, crossEntropyForwardSpec, softmaxForwardSpec } from "./cross-entropy.js";
import type { DropoutArgs } from "./dropout.js";
import { dropoutSpec } from "./dropout.js";
import type { AddArgs, ScaleArgs } from "./elementwise.js";
import { addSpec, scaleSpec } from "./elementwise.js";
import type { EmbeddingBackwardArgs, EmbeddingForwardArgs } from "./embedding.js";
import { embeddingBackwardSpec, embeddingForwardSpec } from "./embedding.js";
import type { MatmulArgs, SumRowsArgs } from "./matmul.js";
import { matmulSpec, sumRowsSpec } from "./matmul.js";
import type { LayerNormBackwardArgs, LayerNormForwardArgs, RmsNormBackwardArgs, RmsNormForwardArgs } from "./norm.js";
import { layerNormBackwardSpec, layerNormForwardSpec, rmsNormBackwardSpec, rmsNormForwardSpec } from "./norm.js";
import type { RopeBackwardArgs, RopeForwardArgs } from "./rope.js";
import { ropeBackwardSpec, ropeForwardSpec } from "./rope.js";
import type { ReduceArgs } from "./reduce.js";
import { sumSpec, sumSquaresSpec } from "./reduce.js";
import type { GroupedMatmulArgs, GroupedMatmulWeightGradArgs } from "./grouped-matmul.js";
import { groupedMatmulSpec, groupedMatmulWeightGradSpec } from "./grouped-matmul.js";
import type { MoeCombineArgs, MoeCombineScaleGradArgs, MoeDispatchArgs, MoeRouteArgs, MoeRouteBackwardArgs } from "./moe.js";
import { moeCombineScaleGradSpec, moeCombineSpec, moeDispatchSpec, moeRouteBackwardSpec, moeRouteSpec } from "./moe.js";
import type { Mamba3ScanBackwardArgs, Mamba3ScanForwardArgs } from "./mamba3.js";
import { mamba3ScanBackwardSpec, mamba3ScanForwardSpec } from "./mamba3.js";
import type { SsdScanBackwardArgs, SsdScanForwardArgs } from "./ssd.js";
import { ssdScanBackwardSpec, ssdScanForwardSpec } from "./ssd.js";
import type { KernelSpec } from "./spec.js";

/** The arguments of every v1 kernel, by name. */
export interface KernelArgsMap {
  matmul: MatmulArgs;
  sumRows: SumRowsArgs;
  embeddingForward: EmbeddingForwardArgs;
  embeddingBackward: EmbeddingBackwardArgs;
  layerNormForward: LayerNormForwardArgs;
  layerNormBackward: LayerNormBackwardArgs;
  rmsNormForward: RmsNormForwardArgs;
  rmsNormBackward: RmsNormBackwardArgs;
  geluForward: UnaryForwardArgs;
  geluBackward: UnaryBackwardArgs;
  siluForward: UnaryForwardArgs;
  siluBackward: UnaryBackwardArgs;
  swiGluForward: SwiGluForwardArgs;
  swiGluBackward: SwiGluBackwardArgs;
  ropeForward: RopeForwardArgs;
  ropeBackward: RopeBackwardArgs;
  attentionForward: AttentionForwardArgs;
  attentionBackward: AttentionBackwardArgs;
  crossEntropyForward: CrossEntropyForwardArgs;
  crossEntropyBackward: CrossEntropyBackwardArgs;
  softmaxForward: SoftmaxForwardArgs;
  add: AddArgs;
  scale: ScaleArgs;
  dropout: DropoutArgs;
  sum: ReduceArgs;
  sumSquares: ReduceArgs;
  adamW: AdamWArgs;
  cast: CastArgs;
  fill: FillArgs;
  checkFinite: CheckFiniteArgs;
  copyStrided: CopyStridedArgs;
  conv1dCausalForward: Conv1dCausalForwardArgs;
  conv1dCausalBackward: Conv1dCausalBackwardArgs;
  moeRoute: MoeRouteArgs;
  moeRouteBackward: MoeRouteBackwardArgs;
  moeDispatch: MoeDispatchArgs;
  moeCombine: MoeCombineArgs;
  moeCombineScaleGrad: MoeCombineScaleGradArgs;
  groupedMatmul: GroupedMatmulArgs;
  groupedMatmulWeightGrad: GroupedMatmulWeightGradArgs;
  ssdScanForward: SsdScanForwardArgs;
  ssdScanBackward: SsdScanBackwardArgs;
  mamba3ScanForward: Mamba3ScanForwardArgs;
  mamba3ScanBackward: Mamba3ScanBackwardArgs;
}

export type KernelName = keyof KernelArgsMap;

/** A backend's kernel table: one function per kernel, enqueued in call order. */
export type Kernels = { readonly [K in KernelName]: (args: KernelArgsMap[K]) => void };

/** Layout, operand and check specs for every kernel. */
export const kernelSpecs: { readonly [K in KernelName]: KernelSpec<KernelArgsMap[K]> } = {
  matmul: matmulSpec,
  sumRows: sumRowsSpec,
  embeddingForward: embeddingForwardSpec,
  embeddingBackward: embeddingBackwardSpec,
  layerNormForward: layerNormForwardSpec,
  layerNormBackward: layerNormBackwardSpec,
  rmsNormForward: rmsNormForwardSpec,
  rmsNormBackward: rmsNormBackwardSpec,
  geluForward: geluForwardSpec,
  geluBackward: geluBackwardSpec,
  siluForward: siluForwardSpec,
  siluBackward: siluBackwardSpec,
  swiGluForward: swiGluForwardSpec,
  swiGluBackward: swiGluBackwardSpec,
  ropeForward: ropeForwardSpec,
  ropeBackward: ropeBackwardSpec,
  attentionForward: attentionForwardSpec,
  attentionBackward: attentionBackwardSpec,
  crossEntropyForward: crossEntropyForwardSpec,
  crossEntropyBackward: crossEntropyBackwardSpec,
  softmaxForward: softmaxForwardSpec,
  add: addSpec,
  scale: scaleSpec,
  dropout: dropoutSpec,
  sum: sumSpec,
  sumSquares: sumSquaresSpec,
  adamW: adamWSpec,
  cast: castSpec,
  fill: fillSpec,
  checkFinite: checkFiniteSpec,
  copyStrided: copyStridedSpec,
  conv1dCausalForward: conv1dCausalForwardSpec,
  conv1dCausalBackward: conv1dCausalBackwardSpec,
  moeRoute: moeRouteSpec,
  moeRouteBackward: moeRouteBackwardSpec,
  moeDispatch: moeDispatchSpec,
  moeCombine: moeCombineSpec,
  moeCombineScaleGrad: moeCombineScaleGradSpec,
  groupedMatmul: groupedMatmulSpec,
  groupedMatmulWeightGrad: groupedMatmulWeightGradSpec,
  ssdScanForward: ssdScanForwardSpec,
  ssdScanBackward: ssdScanBackwardSpec,
  mamba3ScanForward: mamba3ScanForwardSpec,
  mamba3ScanBackward: mamba3ScanBackwardSpec,
};

/** Typed kernel-name constants: `Kernel.matmul === "matmul"`. */
export const Kernel = Object.freeze(
  Object.fromEntries(Object.keys(kernelSpecs).map((k) => [k, k])) as { readonly [K in KernelName]: K },
);

export const KERNEL_NAMES = Object.freeze(Object.keys(kernelSpecs) as KernelName[]);

/** Forward kernels and the backward kernel that differentiates them. */
export const BACKWARD_OF: Readonly<Partial<Record<KernelName, KernelName>>> = {
  embeddingForward: "embeddingBackward",
  layerNormForward: "layerNormBackward",
  rmsNormForward: "rmsNormBackward",
  geluForward: "geluBackward",
  siluForward: "siluBackward",
  swiGluForward: "swiGluBackward",
  ropeForward: "ropeBackward",
  attentionForward: "attentionBackward",
  crossEntropyForward: "crossEntropyBackward",
  // matmul is its own backward (transposed calls) with sumRows for the bias.
  matmul: "matmul",
  moeRoute: "moeRouteBackward",
  // Moving tokens to their experts and back are each other's backward; moeCombineScaleGrad gives the weights' gradient.
  moeDispatch: "moeCombine",
  moeCombine: "moeDispatch",
  // groupedMatmul is its own backward for A (transB flipped); groupedMatmulWeightGrad gives B's.
  groupedMatmul: "groupedMatmulWeightGrad",
  conv1dCausalForward: "conv1dCausalBackward",
  ssdScanForward: "ssdScanBackward",
  mamba3ScanForward: "mamba3ScanBackward",
  // dropout's backward is the same mask on the gradient: the same call.
  dropout: "dropout",
};

export type { KernelSpec, OperandSpec, OperandRole, OperandInit } from "./spec.js";
export * from "./adamw.js";
export * from "./activation.js";
export * from "./attention.js";
export * from "./convert.js";
export * from "./conv1d.js";
export * from "./copy.js";
export * from "./cross-entropy.js";
export * from "./dropout.js";
export * from "./elementwise.js";
export * from "./embedding.js";
export * from "./grouped-matmul.js";
export * from "./matmul.js";
export * from "./moe.js";
export * from "./norm.js";
export * from "./rope.js";
export * from "./ssd.js";
export * from "./mamba3.js";
export * from "./reduce.js";
export { operand, stridedExtent, wideDtype } from "./spec.js";
