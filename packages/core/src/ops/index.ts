import { linearGrad } from "./linear.js";
import { embeddingGrad } from "./embedding.js";
import { addGrad } from "./residual.js";
import { scaleGrad } from "./scale.js";
import { layerNormGrad, rmsNormGrad } from "./norm.js";
import { geluGrad, siluGrad, swiGluGrad } from "./activation.js";
import { conv1dCausalGrad } from "./conv1d.js";
import { ssdScanGrad } from "./ssd.js";
import { mamba3ScanGrad } from "./mamba3.js";
import { ropeGrad } from "./rope.js";
import { dropoutGrad } from "./dropout.js";
import { attentionGrad } from "./attention.js";
import { copyStridedGrad } from "./copy.js";
import { crossEntropyGrad } from "./loss.js";
import { groupedLinearGrad, moeCombineGrad, moeDispatchGrad, moeRouteGrad } from "./moe.js";
import type { GradRule } from "./grad-rule.js";

/** Gradient rules by name (a forward node's `grad` attribute). */
export const gradRules: Readonly<Record<string, GradRule>> = {
  linear: linearGrad,
  embedding: embeddingGrad,
  add: addGrad,
  scale: scaleGrad,
  layerNorm: layerNormGrad,
  rmsNorm: rmsNormGrad,
  gelu: geluGrad,
  silu: siluGrad,
  conv1dCausal: conv1dCausalGrad,
  ssdScan: ssdScanGrad,
  mamba3Scan: mamba3ScanGrad,
  swiGlu: swiGluGrad,
  rope: ropeGrad,
  dropout: dropoutGrad,
  attention: attentionGrad,
  copyStrided: copyStridedGrad,
  crossEntropy: crossEntropyGrad,
  moeRoute: moeRouteGrad,
  moeDispatch: moeDispatchGrad,
  moeCombine: moeCombineGrad,
  groupedLinear: groupedLinearGrad,
};

export { linear, linearPerHead, linearRows, type WeightLayout } from "./linear.js";
export { embedding } from "./embedding.js";
export { add } from "./residual.js";
export { scaleBy } from "./scale.js";
export { layerNorm, rmsNorm } from "./norm.js";
export { gelu, silu, swiGlu } from "./activation.js";
export { conv1dCausal } from "./conv1d.js";
export { ssdScan, type SsdParams } from "./ssd.js";
export { mamba3Scan, type Mamba3ScanInputs, type Mamba3ScanParams } from "./mamba3.js";
export { rope } from "./rope.js";
export { dropout } from "./dropout.js";
export { attention, type AttentionShape } from "./attention.js";
export { assembleBlocks, type BlockLayout, type BlockShape, denseBlock, gatherBlock } from "./copy.js";
export { crossEntropyLoss } from "./loss.js";
export { groupedLinear, moeCombine, moeDispatch, moeRoute, type MoeRouting } from "./moe.js";
export type { GradRule } from "./grad-rule.js";
