import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, kernelAttrs, operandOf } from "./grad-rule.js";

/** out = alpha * x, element-wise (Gemma's embeddings times sqrt(hidden)). */
export function scaleBy(g: Graph, x: number, alpha: number, name: string): number {
  const out = g.tensor(g.info(x).shape, g.info(x).dtype, "activation", name);
  addKernelNode(g, "scale", { x, out }, { n: g.elements(x), alpha, dtype: g.info(x).dtype }, { grad: "scale" });
  return out;
}

/** d(alpha x) = alpha dOut. */
export const scaleGrad: GradRule = (node, b, [dOut]) => {
  const x = operandOf(node, "x");
  if (dOut === undefined || !b.needsGrad(x)) return;
  const dX = b.activation(b.graph.info(x).shape, x, `d(${b.graph.info(x).name})`);
  addKernelNode(b.graph, "scale", { x: dOut, out: dX }, { ...kernelAttrs(node).args });
  b.addGrad(x, dX);
};
