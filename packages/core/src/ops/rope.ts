import type { RopeScaling } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, kernelAttrs, operandOf } from "./grad-rule.js";

/** Rotary embedding on x (batch*seqLen, heads*headDim), positions 0..seqLen-1 in each sequence (from each document's start in packed rows: g.documentStarts). */
export function rope(g: Graph, x: number, dims: { batch: number; seqLen: number; heads: number; headDim: number; theta: number; scaling?: RopeScaling }, name: string): number {
  const out = g.tensor(g.info(x).shape, g.info(x).dtype, "activation", name);
  const docStarts = g.documentStarts;
  addKernelNode(g, "ropeForward", { x, out, ...(docStarts === undefined ? {} : { docStarts }) }, { ...dims, dtype: g.info(x).dtype }, { grad: "rope" });
  return out;
}

export const ropeGrad: GradRule = (node, b, [dOut]) => {
  const x = operandOf(node, "x");
  if (dOut === undefined || !b.needsGrad(x)) return;
  const dX = b.activation(b.graph.info(x).shape, x, `d(${b.graph.info(x).name})`);
  const docStarts = kernelAttrs(node).operands.docStarts;
  addKernelNode(b.graph, "ropeBackward", { x: dOut, out: dX, ...(docStarts ? { docStarts } : {}) }, { ...kernelAttrs(node).args });
  b.addGrad(x, dX);
};
