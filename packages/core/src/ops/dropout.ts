import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, kernelAttrs, operandOf } from "./grad-rule.js";

/**
 * Dropout of x with probability p (LoRA's dropout on an adapter's input): the mask comes from
 * the step's dropout seed (RuntimeScalars.dropoutSeed, new every micro-batch) xor `salt`, so
 * each node draws its own; its backward applies the same mask to the gradient.
 */
export function dropout(g: Graph, x: number, p: number, salt: number, name: string): number {
  const info = g.info(x);
  const out = g.tensor(info.shape, info.dtype, "activation", name);
  const n = info.shape.reduce((a, b) => a * b, 1);
  addKernelNode(g, "dropout", { x, out }, { n, p, seed: 0, dtype: info.dtype }, { grad: "dropout", runtimeArgs: { seed: "dropoutSeed" }, extraAttrs: { runtimeXor: { seed: salt } } });
  return out;
}

export const dropoutGrad: GradRule = (node, b, [dOut]) => {
  const x = operandOf(node, "x");
  if (dOut === undefined || !b.needsGrad(x)) return;
  const a = kernelAttrs(node);
  const dX = b.activation(b.graph.info(x).shape, x, `d(${b.graph.info(x).name})`);
  addKernelNode(b.graph, "dropout", { x: dOut, out: dX }, { ...a.args }, { runtimeArgs: { ...a.runtimeArgs }, extraAttrs: { runtimeXor: { ...(a.runtimeXor ?? {}) } } });
  b.addGrad(x, dX);
};
