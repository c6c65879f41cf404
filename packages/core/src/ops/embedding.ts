import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import type { DType } from "@kiln/contract";
import { type GradRule, gradDtypeArg, kernelAttrs, operandOf } from "./grad-rule.js";

/** out (count, dim) = table[ids]. ids is an i32 tensor of `count` elements. */
export function embedding(g: Graph, ids: number, table: number, name: string): number {
  const count = g.elements(ids);
  const [vocab, dim] = g.info(table).shape;
  const out = g.tensor([count, dim], g.info(table).dtype, "activation", name);
  addKernelNode(g, "embeddingForward", { ids, table, out }, { count, vocab, dim, dtype: g.info(table).dtype }, { grad: "embedding" });
  return out;
}

export const embeddingGrad: GradRule = (node, b, [dOut]) => {
  const table = operandOf(node, "table");
  if (dOut === undefined || !b.needsGrad(table)) return;
  const args = kernelAttrs(node).args;
  const dTable = b.paramGrad(table);
  addKernelNode(b.graph, "embeddingBackward", { ids: operandOf(node, "ids"), dOut, dTable }, { ...args, ...gradDtypeArg(b.graph, dTable, args.dtype as DType) });
};
