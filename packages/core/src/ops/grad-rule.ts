import type { GraphNode } from "../graph/graph.js";
import type { KernelNodeAttrs } from "../graph/kernel-node.js";
import type { BackwardBuilder } from "../graph/op.js";

/** Appends the gradient nodes of a forward node, given its outputs' gradients. */
export type GradRule = (node: GraphNode, b: BackwardBuilder, outGrads: readonly (number | undefined)[]) => void;

export function kernelAttrs(node: GraphNode): KernelNodeAttrs {
  return node.attrs as unknown as KernelNodeAttrs;
}

/** The tensor bound to operand `key` of a kernel node. */
export function operandOf(node: GraphNode, key: string): number {
  const b = kernelAttrs(node).operands[key];
  if (!b) throw new Error(`node ${node.index} (${kernelAttrs(node).kernel}) has no operand ${key}`);
  return b.id;
}
