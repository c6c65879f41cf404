import type { DType, FloatDType } from "@kiln/contract";
import type { Graph, GraphNode } from "../graph/graph.js";
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

/**
 * A new gradient tensor for parameter `param`: f32 whatever the parameter's dtype, so that
 * bf16/f16 training sums its parameter gradients in f32 (a bias gradient of thousands of
 * tokens can pass f16's 65504) and AdamW reads them as they are.
 */
export function paramGradTensor(g: Graph, param: number): number {
  const p = g.info(param);
  if (p.kind !== "param") throw new Error(`${p.name} is not a parameter`);
  return g.tensor(p.shape, "f32", "grad", `grad(${p.name})`, param);
}

/** The argument that makes a kernel of `dtype` write gradient tensor `grad` in that tensor's dtype: none, or { [key]: "f32" }. */
export function gradDtypeArg(g: Graph, grad: number, dtype: DType, key: "gradDtype" | "cDtype" = "gradDtype"): Record<string, FloatDType> {
  const gd = g.info(grad).dtype;
  return gd === dtype ? {} : { [key]: gd as FloatDType };
}
