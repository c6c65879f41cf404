import { kernelSpecs } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import type { KernelNodeAttrs } from "../graph/kernel-node.js";
import type { Lifetime } from "./liveness.js";

/**
 * Lets an output take over its input's bytes where the kernel allows that alias
 * (spec.aliases), the input dies at this node, and both are whole activations of
 * the same size: crossEntropyBackward's dLogits over logits, geluBackward's dX
 * over dOut, rope over its projection. Returns the merged lifetimes; `alias`
 * maps each absorbed tensor to the tensor whose bytes it uses.
 */
export function mergeInPlace(g: Graph, lifetimes: readonly Lifetime[]): { lifetimes: Lifetime[]; alias: Map<number, number> } {
  const byId = new Map(lifetimes.map((l) => [l.id, { ...l }]));
  const alias = new Map<number, number>();
  const root = (id: number): number => {
    let r = id;
    while (alias.has(r)) r = alias.get(r)!;
    return r;
  };
  for (const node of g.nodes) {
    const a = node.attrs as unknown as KernelNodeAttrs;
    for (const [outKey, inKey] of kernelSpecs[a.kernel].aliases ?? []) {
      const out = a.operands[outKey];
      const inp = a.operands[inKey];
      if (!out || !inp || (out.offset ?? 0) !== 0 || (inp.offset ?? 0) !== 0 || out.id === inp.id) continue;
      const outLife = byId.get(out.id);
      const inRoot = root(inp.id);
      const inLife = byId.get(inRoot);
      if (!outLife || !inLife || alias.has(out.id)) continue;
      const dies = inLife.last === node.index && outLife.first === node.index;
      if (!dies || g.bytes(out.id) !== g.bytes(inp.id)) continue;
      alias.set(out.id, inRoot);
      inLife.last = Math.max(inLife.last, outLife.last);
      inLife.bytes = Math.max(inLife.bytes, outLife.bytes);
      byId.delete(out.id);
    }
  }
  return { lifetimes: [...byId.values()], alias };
}
