import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, kernelAttrs, operandOf } from "./grad-rule.js";

/**
 * Cross-entropy of logits (rows, vocab) against i32 targets (negative = ignored).
 * Returns the f32 sum of the row losses as a one-element "output" tensor; the
 * caller divides by the number of valid rows. The backward pass starts here.
 */
export function crossEntropyLoss(g: Graph, logits: number, targets: number, name: string): { lossSum: number; lossNode: number } {
  const [rows, vocab] = g.info(logits).shape;
  const dtype = g.info(logits).dtype;
  const losses = g.tensor([rows], "f32", "activation", `${name}.rows`);
  const lse = g.tensor([rows], "f32", "activation", `${name}.lse`);
  const node = addKernelNode(g, "crossEntropyForward", { logits, targets, losses, lse }, { rows, vocab, dtype }, { grad: "crossEntropy" });
  const lossSum = g.tensor([1], "f32", "output", name);
  addKernelNode(g, "sum", { x: losses, out: lossSum }, { n: rows, dtype: "f32" });
  return { lossSum, lossNode: node.index };
}

/** The root of the backward pass: d(loss)/d(row loss) is the run-time lossScale. */
export const crossEntropyGrad: GradRule = (node, b) => {
  const logits = operandOf(node, "logits");
  const { rows, vocab, dtype } = kernelAttrs(node).args as { rows: number; vocab: number; dtype: string };
  const dLogits = b.activation([rows, vocab], logits, `d(${b.graph.info(logits).name})`);
  addKernelNode(
    b.graph,
    "crossEntropyBackward",
    { logits, targets: operandOf(node, "targets"), lse: operandOf(node, "lse"), dLogits },
    { rows, vocab, lossScale: 1, dtype },
    { runtimeArgs: { lossScale: "lossScale" } },
  );
  b.addGrad(logits, dLogits);
};
