import type { Graph, GraphNode } from "./graph.js";
import { boundWhole, kernelNodeAttrs } from "./kernel-node.js";

/** Norm forwards that can add the residual stream themselves (their optional `residual` and `sum`). */
const NORMS = new Set(["layerNormForward", "rmsNormForward"]);

/**
 * Folds each forward `add` whose sum a norm reads next into that norm: the norm reads
 * both addends, writes their sum (rounded to the dtype, the bits the add wrote) and
 * normalizes it, so a pre-norm block's residual sum is not written by one kernel and
 * read back by the next. The add is dropped; every later reader of the sum (the next
 * residual add, the norm's backward) reads what the norm wrote. Applies where no node
 * between the two reads or writes the sum or writes an addend. Run it on a finished
 * graph (after autodiff and recomputation: nodes are renumbered).
 */
export function fuseResidualNorms(g: Graph): void {
  const writers = g.writers();
  const dropped = new Set<number>();
  const replaced = new Map<number, Omit<GraphNode, "index">>();
  for (const norm of g.nodes) {
    const n = kernelNodeAttrs(norm);
    if (norm.backward || !NORMS.has(n.kernel) || n.operands.residual) continue;
    const x = n.operands.x;
    const w = writers.get(x.id);
    if (!boundWhole(x) || w?.length !== 1) continue;
    const add = g.nodes[w[0]];
    const addAttrs = kernelNodeAttrs(add);
    if (add.backward || addAttrs.kernel !== "add" || add.index > norm.index || dropped.has(add.index)) continue;
    const { a, b, out } = addAttrs.operands;
    if (!boundWhole(a) || !boundWhole(b) || !boundWhole(out) || addAttrs.args.dtype !== n.args.dtype || addAttrs.args.n !== g.elements(x.id)) continue;
    const between = g.nodes.slice(add.index + 1, norm.index);
    if (between.some((m) => m.inputs.includes(x.id) || m.outputs.some((t) => t === x.id || t === a.id || t === b.id))) continue;
    const operands = { ...n.operands, x: { id: a.id }, residual: { id: b.id }, sum: { id: x.id } };
    replaced.set(norm.index, {
      ...norm,
      inputs: [...new Set([...norm.inputs.filter((t) => t !== x.id), a.id, b.id])],
      outputs: [...norm.outputs, x.id],
      attrs: { ...norm.attrs, operands },
    });
    dropped.add(add.index);
  }
  if (dropped.size === 0) return;
  g.setNodes(g.nodes.filter((n) => !dropped.has(n.index)).map((n) => replaced.get(n.index) ?? n));
}
