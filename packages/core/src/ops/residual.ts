import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, operandOf } from "./grad-rule.js";

/** out = a + b (the residual stream). */
export function add(g: Graph, a: number, b: number, name: string): number {
  const sa = g.info(a).shape.join("x"), sb = g.info(b).shape.join("x");
  if (sa !== sb) throw new Error(`${name}: cannot add ${sa} and ${sb}`);
  const out = g.tensor(g.info(a).shape, g.info(a).dtype, "activation", name);
  addKernelNode(g, "add", { a, b, out }, { n: g.elements(a), dtype: g.info(a).dtype }, { grad: "add" });
  return out;
}

/** d(a + b) passes the same gradient to both sides; no kernel runs. */
export const addGrad: GradRule = (node, b, [dOut]) => {
  if (dOut === undefined) return;
  for (const key of ["a", "b"]) {
    const t = operandOf(node, key);
    if (b.needsGrad(t)) b.addGrad(t, dOut);
  }
};
