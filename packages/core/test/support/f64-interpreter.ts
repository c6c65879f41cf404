import { oracle } from "@kiln/contract";
import type { Graph } from "../../src/graph/graph.js";
import type { KernelNodeAttrs } from "../../src/graph/kernel-node.js";

/**
 * Runs a graph's kernel nodes with the oracle on float64 storage (no rounding to
 * f32 anywhere), so finite differences of the loss are accurate to ~1e-9.
 * `storage` maps tensor id -> values; missing tensors are created zeroed.
 */
export function runF64(g: Graph, storage: Map<number, Float64Array>, runtime: { lossScale: number }, upTo = g.nodes.length): void {
  for (const t of g.tensors) if (!storage.has(t.id)) storage.set(t.id, new Float64Array(g.elements(t.id)));
  for (const node of g.nodes.slice(0, upTo)) {
    const a = node.attrs as unknown as KernelNodeAttrs;
    const args: Record<string, unknown> = { ...a.args };
    for (const [key, name] of Object.entries(a.runtimeArgs ?? {})) args[key] = runtime[name as "lossScale"];
    const values: Record<string, Float64Array> = {};
    for (const [key, b] of Object.entries(a.operands)) values[key] = storage.get(b.id)!.subarray(b.offset ?? 0);
    (oracle[a.kernel] as (x: unknown, v: Record<string, Float64Array>) => void)(args, values);
  }
}
