import type { Graph, GraphNode } from "../graph/graph.js";
import { type KernelNodeAttrs, boundWhole, kernelNodeAttrs } from "../graph/kernel-node.js";

/** Norm backward kernels that add a gradient into the dX they write (their optional `dResidual`). */
const TAKES_RESIDUAL = new Set(["layerNormBackward", "rmsNormBackward"]);

/**
 * Sums two gradients of one tensor without an `add` node, where the node that wrote
 * `grad` can add `sum` itself:
 * - a norm backward's dX: the node reads `sum` as its dResidual and writes the total
 *   into dX (the planner lets dX take over sum's bytes where sum dies there). A
 *   pre-norm block's input is read by its norm and by the residual add, so every
 *   block's two norms take the residual stream's gradient this way;
 * - a matmul's C (a linear layer's input gradient): the matmul accumulates into `sum`
 *   instead, as Llama's q/k/v and gate/up projections of one input do.
 * Either way the total is rounded once. `sum` must be complete before that node and
 * read by no later one. Returns the tensor that now holds the total (dX; `sum` for a
 * matmul), or undefined, changing nothing, when neither fold applies.
 */
export function foldGradientSum(g: Graph, sum: number, grad: number): number | undefined {
  const at = onlyWriterOf(g, grad);
  if (at === undefined || g.bytes(sum) !== g.bytes(grad) || g.info(sum).dtype !== g.info(grad).dtype) return undefined;
  for (let i = at; i < g.nodes.length; i++) {
    const n = g.nodes[i];
    if (n.outputs.includes(sum) || (i > at && (n.inputs.includes(grad) || n.inputs.includes(sum)))) return undefined;
  }
  const node = g.nodes[at];
  const attrs = kernelNodeAttrs(node);
  if (TAKES_RESIDUAL.has(attrs.kernel)) return foldIntoNorm(g, node, attrs, sum, grad);
  if (attrs.kernel === "matmul") return foldIntoMatmul(g, node, attrs, sum, grad);
  return undefined;
}

function foldIntoNorm(g: Graph, node: GraphNode, attrs: KernelNodeAttrs, sum: number, grad: number): number | undefined {
  const { dX, dResidual } = attrs.operands;
  if (dResidual || !boundWhole(dX) || dX.id !== grad) return undefined;
  g.replaceNode(node.index, { inputs: [...node.inputs, sum], outputs: node.outputs, attrs: { ...attrs, operands: { ...attrs.operands, dResidual: { id: sum } } } });
  return grad;
}

/** C = sum + A B: the matmul writes all of `grad`, at no offset, in its own dtype, without a bias. */
function foldIntoMatmul(g: Graph, node: GraphNode, attrs: KernelNodeAttrs, sum: number, grad: number): number | undefined {
  const { c, bias } = attrs.operands;
  const args = attrs.args as { accumulate?: boolean; cDtype?: string };
  if (args.accumulate || args.cDtype !== undefined || bias || !boundWhole(c) || c.id !== grad) return undefined;
  g.replaceNode(node.index, {
    inputs: [...node.inputs, sum],
    outputs: node.outputs.map((t) => (t === grad ? sum : t)),
    attrs: { ...attrs, operands: { ...attrs.operands, c: { id: sum } }, args: { ...args, accumulate: true } },
  });
  return sum;
}

/** The index of the only node writing `t`, if exactly one does. */
function onlyWriterOf(g: Graph, t: number): number | undefined {
  let found: number | undefined;
  for (const n of g.nodes) {
    if (!n.outputs.includes(t)) continue;
    if (found !== undefined) return undefined;
    found = n.index;
  }
  return found;
}
