import type { Graph, GraphNode } from "./graph.js";
import type { BoundOperand, KernelNodeAttrs } from "./kernel-node.js";

/** Norm forwards that can add the residual stream themselves (their optional `residual` and `sum`). */
const NORMS = new Set(["layerNormForward", "rmsNormForward"]);

const attrsOf = (n: GraphNode) => n.attrs as unknown as KernelNodeAttrs;
const whole = (b: BoundOperand | undefined) => b !== undefined && (b.offset ?? 0) === 0;

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
  const writers = new Map<number, number[]>();
  for (const n of g.nodes) for (const t of n.outputs) writers.set(t, [...(writers.get(t) ?? []), n.index]);
  const dropped = new Set<number>();
  const replaced = new Map<number, Omit<GraphNode, "index">>();
  for (const norm of g.nodes) {
    if (norm.backward || norm.op !== "kernel" || !NORMS.has(attrsOf(norm).kernel) || attrsOf(norm).operands.residual) continue;
    const x = attrsOf(norm).operands.x;
    const w = writers.get(x.id);
    if (!whole(x) || w?.length !== 1) continue;
    const add = g.nodes[w[0]];
    const addAttrs = attrsOf(add);
    if (add.backward || add.op !== "kernel" || addAttrs.kernel !== "add" || add.index > norm.index || dropped.has(add.index)) continue;
    const { a, b, out } = addAttrs.operands;
    if (!whole(a) || !whole(b) || !whole(out) || addAttrs.args.dtype !== attrsOf(norm).args.dtype || addAttrs.args.n !== g.elements(x.id)) continue;
    const between = g.nodes.slice(add.index + 1, norm.index);
    if (between.some((n) => n.inputs.includes(x.id) || n.outputs.some((t) => t === x.id || t === a.id || t === b.id))) continue;
    const operands = { ...attrsOf(norm).operands, x: { id: a.id }, residual: { id: b.id }, sum: { id: x.id } };
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
