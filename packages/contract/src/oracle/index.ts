import type { KernelArgsMap, KernelName } from "../kernels/index.js";
import { adamWOracle } from "./adamw.js";
import { geluBackwardOracle, geluForwardOracle, siluBackwardOracle, siluForwardOracle, swiGluBackwardOracle, swiGluForwardOracle } from "./activation.js";
import { attentionBackwardOracle, attentionForwardOracle } from "./attention.js";
import { castOracle, checkFiniteOracle, fillOracle } from "./convert.js";
import { conv1dCausalBackwardOracle, conv1dCausalForwardOracle } from "./conv1d.js";
import { copyStridedOracle } from "./copy.js";
import { crossEntropyBackwardOracle, crossEntropyForwardOracle, softmaxForwardOracle } from "./cross-entropy.js";
import { addOracle, dropoutOracle, scaleOracle, sumOracle, sumSquaresOracle } from "./elementwise.js";
import { embeddingBackwardOracle, embeddingForwardOracle } from "./embedding.js";
import { matmulOracle, sumRowsOracle } from "./matmul.js";
import { layerNormBackwardOracle, layerNormForwardOracle, rmsNormBackwardOracle, rmsNormForwardOracle } from "./norm.js";
import { ropeBackwardOracle, ropeForwardOracle } from "./rope.js";
import { groupedMatmulOracle, groupedMatmulWeightGradOracle } from "./grouped-matmul.js";
import { moeCombineOracle, moeCombineScaleGradOracle, moeDispatchOracle, moeRouteBackwardOracle, moeRouteOracle } from "./moe.js";
import { ssdScanBackwardOracle, ssdScanForwardOracle } from "./ssd.js";
import { mamba3ScanBackwardOracle, mamba3ScanForwardOracle } from "./mamba3.js";
import type { OracleKernel } from "./types.js";

/** The reference implementation of every v1 kernel (f64, plain loops). */
export const oracle: { readonly [K in KernelName]: OracleKernel<KernelArgsMap[K]> } = {
  matmul: matmulOracle,
  sumRows: sumRowsOracle,
  embeddingForward: embeddingForwardOracle,
  embeddingBackward: embeddingBackwardOracle,
  layerNormForward: layerNormForwardOracle,
  layerNormBackward: layerNormBackwardOracle,
  rmsNormForward: rmsNormForwardOracle,
  rmsNormBackward: rmsNormBackwardOracle,
  geluForward: geluForwardOracle,
  geluBackward: geluBackwardOracle,
  siluForward: siluForwardOracle,
  siluBackward: siluBackwardOracle,
  swiGluForward: swiGluForwardOracle,
  swiGluBackward: swiGluBackwardOracle,
  ropeForward: ropeForwardOracle,
  ropeBackward: ropeBackwardOracle,
  attentionForward: attentionForwardOracle,
  attentionBackward: attentionBackwardOracle,
  crossEntropyForward: crossEntropyForwardOracle,
  crossEntropyBackward: crossEntropyBackwardOracle,
  softmaxForward: softmaxForwardOracle,
  add: addOracle,
  scale: scaleOracle,
  dropout: dropoutOracle,
  sum: sumOracle,
  sumSquares: sumSquaresOracle,
  adamW: adamWOracle,
  cast: castOracle,
  fill: fillOracle,
  checkFinite: checkFiniteOracle,
  copyStrided: copyStridedOracle,
  conv1dCausalForward: conv1dCausalForwardOracle,
  conv1dCausalBackward: conv1dCausalBackwardOracle,
  moeRoute: moeRouteOracle,
  moeRouteBackward: moeRouteBackwardOracle,
  moeDispatch: moeDispatchOracle,
  moeCombine: moeCombineOracle,
  moeCombineScaleGrad: moeCombineScaleGradOracle,
  groupedMatmul: groupedMatmulOracle,
  groupedMatmulWeightGrad: groupedMatmulWeightGradOracle,
  ssdScanForward: ssdScanForwardOracle,
  ssdScanBackward: ssdScanBackwardOracle,
  mamba3ScanForward: mamba3ScanForwardOracle,
  mamba3ScanBackward: mamba3ScanBackwardOracle,
};

export type { OracleKernel } from "./types.js";
export { gelu, geluGrad, silu, siluGrad, sigmoid } from "./activation.js";
export { softplus } from "./ssd.js";
