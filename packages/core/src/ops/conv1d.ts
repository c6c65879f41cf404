import type { DType } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, gradDtypeArg, kernelAttrs, operandOf } from "./grad-rule.js";

/**
 * Causal depthwise convolution over time of x (batch*seqLen, channels), one filter of
 * K taps per channel (weight (channels, K), bias (channels)): out at t sees x at t-K+1..t.
 */
export function conv1dCausal(g: Graph, x: number, weight: number, bias: number | undefined, dims: { batch: number; seqLen: number }, name: string): number {
  const [rows, channels] = g.info(x).shape;
  const [wChannels, kernelSize] = g.info(weight).shape;
  if (wChannels !== channels) throw new Error(`${name}: input has ${channels} channels, weight ${g.info(weight).name} has ${wChannels}`);
  const dtype = g.info(x).dtype;
  const out = g.tensor([rows, channels], dtype, "activation", name);
  addKernelNode(g, "conv1dCausalForward", { x, weight, out, ...(bias === undefined ? {} : { bias }) }, { ...dims, channels, kernelSize, dtype }, { grad: "conv1dCausal" });
  return out;
}

export const conv1dCausalGrad: GradRule = (node, b, [dOut]) => {
  if (dOut === undefined) return;
  const x = operandOf(node, "x");
  const weight = operandOf(node, "weight");
  const bias = kernelAttrs(node).operands.bias?.id;
  const dX = b.activation(b.graph.info(x).shape, x, `d(${b.graph.info(x).name})`);
  addKernelNode(
    b.graph,
    "conv1dCausalBackward",
    { dOut, x, weight, dX, dWeight: b.paramGrad(weight), ...(bias === undefined ? {} : { dBias: b.paramGrad(bias) }) },
    { ...kernelAttrs(node).args, ...gradDtypeArg(b.graph, b.paramGrad(weight), kernelAttrs(node).args.dtype as DType) },
  );
  b.addGrad(x, dX);
};
