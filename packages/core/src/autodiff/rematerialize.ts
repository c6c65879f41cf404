import type { Graph, GraphNode } from "../graph/graph.js";
import type { BoundOperand, KernelNodeAttrs } from "../graph/kernel-node.js";

/**
 * Which activations the backward pass recomputes instead of keeping from the forward pass:
 * - none:   keep everything
 * - cheap:  recompute GELU, LayerNorm, RMSNorm and SwiGLU outputs (element-wise work)
 * - blocks: gradient checkpointing per transformer block: keep only each block's
 *           input and output, rerun the block's forward (matmuls too) in its backward
 */
export const RECOMPUTE_POLICIES = ["none", "cheap", "blocks"] as const;
export type RecomputePolicy = (typeof RECOMPUTE_POLICIES)[number];

/** The block a node belongs to ("model.layers.0" under the prefix "model.layers"), if any. */
function blockOfScope(prefix: string): (n: GraphNode) => string | undefined {
  const pattern = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\.\\d+`);
  return (n) => pattern.exec(n.scope)?.[0];
}

/** Forward kernels cheap enough (element-wise or one pass over a row) to run again in backward. */
const CHEAP = new Set(["geluForward", "layerNormForward", "rmsNormForward", "swiGluForward"]);

/**
 * Activation recomputation: where a backward node reads an activation made by a
 * recomputable forward node, a copy of that node is inserted just before it and
 * the backward node reads the copy. The forward activation then dies at its last
 * forward use, so the arena shrinks (GELU and norm outputs, ~30% of a GPT-2
 * block's saved bytes) for the price of repeating those cheap kernels.
 * `blockPrefix` is the scope prefix of the model's blocks (ArchDef.blockPrefix), the unit of "blocks".
 */
export function rematerialize(g: Graph, policy: RecomputePolicy, blockPrefix: string): void {
  if (policy === "none") return;
  const blockOf = blockOfScope(blockPrefix);
  const firstBackward = g.nodes.findIndex((n) => n.backward);
  if (firstBackward < 0) return;
  // A tensor's writers, in order: one node, or a node and those that add into it (assembleBlocks' copies).
  const writers = new Map<number, GraphNode[]>();
  for (const n of g.nodes.slice(0, firstBackward)) for (const t of n.outputs) writers.set(t, [...(writers.get(t) ?? []), n]);
  const producer = new Map([...writers].map(([t, ws]) => [t, ws.at(-1)!]));
  // Under "blocks", a tensor made inside a block is recomputed when no forward node outside that block reads it.
  const leavesBlock = new Set<number>();
  for (const n of g.nodes.slice(0, firstBackward)) {
    for (const t of n.inputs) {
      const p = producer.get(t);
      if (p && blockOf(p) !== undefined && blockOf(p) !== blockOf(n)) leavesBlock.add(t);
    }
  }
  const recomputableNode = (n: GraphNode): boolean => {
    if (CHEAP.has((n.attrs as unknown as KernelNodeAttrs).kernel)) return true;
    return policy === "blocks" && blockOf(n) !== undefined && n.outputs.every((t) => !leavesBlock.has(t));
  };
  /** An activation the backward pass may make again: every node writing it can run again. */
  const recomputable = (t: number): boolean => g.info(t).kind === "activation" && (writers.get(t)?.every(recomputableNode) ?? false);

  const out: Omit<GraphNode, "index">[] = g.nodes.slice(0, firstBackward);
  const copies = new Map<number, number>();

  const remap = (attrs: KernelNodeAttrs): KernelNodeAttrs => {
    const operands: Record<string, BoundOperand> = {};
    for (const [k, b] of Object.entries(attrs.operands)) operands[k] = { ...b, id: copies.get(b.id) ?? b.id };
    return { ...attrs, operands };
  };

  /** Makes sure a recomputed copy of `t` exists (every writer of it run again, in order), recomputing their inputs first where they are recomputable too. */
  const ensure = (t: number): void => {
    if (copies.has(t)) return;
    const ws = writers.get(t)!;
    for (const n of ws) for (const i of n.inputs) if (i !== t && recomputable(i)) ensure(i);
    for (const n of ws) {
      for (const o of n.outputs) {
        if (copies.has(o)) continue;
        const info = g.info(o);
        copies.set(o, g.tensor(info.shape, info.dtype, info.kind, `${info.name} (recomputed)`));
      }
      const attrs = remap(n.attrs as unknown as KernelNodeAttrs);
      out.push({
        inputs: n.inputs.map((i) => copies.get(i) ?? i),
        outputs: n.outputs.map((o) => copies.get(o)!),
        attrs: { ...n.attrs, ...attrs, grad: undefined },
        scope: n.scope,
        backward: true,
      });
    }
  };

  for (const n of g.nodes.slice(firstBackward)) {
    for (const t of n.inputs) if (recomputable(t)) ensure(t);
    const attrs = remap(n.attrs as unknown as KernelNodeAttrs);
    out.push({ ...n, inputs: n.inputs.map((i) => copies.get(i) ?? i), outputs: n.outputs.map((o) => copies.get(o) ?? o), attrs: { ...n.attrs, ...attrs } });
  }
  g.setNodes(out);
}
