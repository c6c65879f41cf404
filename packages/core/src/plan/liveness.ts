import type { Graph } from "../graph/graph.js";

/** The nodes between which a tensor's bytes must stay intact: [first, last], inclusive. */
export interface Lifetime {
  id: number;
  first: number;
  last: number;
  bytes: number;
}

/**
 * Lifetimes of the tensors of `kinds` over the node order. A tensor is live from
 * the node that first touches it to the node that last does; a node's inputs and
 * outputs are live at that node together, so they never share bytes.
 */
export function tensorLifetimes(g: Graph, kinds: ReadonlySet<string>): Lifetime[] {
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  for (const node of g.nodes) {
    for (const t of [...node.inputs, ...node.outputs]) {
      if (!kinds.has(g.info(t).kind)) continue;
      if (!first.has(t)) first.set(t, node.index);
      last.set(t, node.index);
    }
  }
  return [...first.keys()].map((id) => ({ id, first: first.get(id)!, last: last.get(id)!, bytes: g.bytes(id) }));
}
