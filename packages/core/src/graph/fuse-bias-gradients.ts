import { type FloatDType, wideDtype } from "@kiln/contract";
import type { Graph, GraphNode } from "./graph.js";
import { boundWhole, kernelNodeAttrs } from "./kernel-node.js";

/** Norm backwards that can sum the columns of the dX they write (their optional `dXColSums`). */
const NORM_BACKWARDS = new Set(["layerNormBackward", "rmsNormBackward"]);

/**
 * Drops each backward `sumRows` that sums the rows of a dX a norm backward wrote (the
 * bias gradient of a linear layer whose output gradient that dX is: GPT-2's attention
 * and MLP output projections, whose outputs join the residual stream the next norm
 * reads) into that norm backward, which adds dX's column sums to the bias gradient as
 * it writes dX: the rows are not read again. Applies where no node between the two
 * touches the bias gradient. Run it on a finished graph (nodes are renumbered).
 */
export function fuseBiasGradients(g: Graph): void {
  const writers = g.writers();
  const dropped = new Set<number>();
  const replaced = new Map<number, Omit<GraphNode, "index">>();
  for (const sum of g.nodes) {
    const s = kernelNodeAttrs(sum);
    if (!sum.backward || sum.op !== "kernel" || s.kernel !== "sumRows" || !s.args.accumulate) continue;
    const { x, out } = s.operands;
    const w = writers.get(x.id);
    if (!boundWhole(x) || !boundWhole(out) || w?.length !== 1) continue;
    const norm = replaced.has(w[0]) ? undefined : g.nodes[w[0]];
    const n = norm && kernelNodeAttrs(norm);
    if (!norm || !n || norm.op !== "kernel" || norm.index > sum.index || !NORM_BACKWARDS.has(n.kernel) || n.operands.dXColSums || !boundWhole(n.operands.dX) || n.operands.dX.id !== x.id) continue;
    const sa = s.args as { rows: number; cols: number; dtype: FloatDType; gradDtype?: FloatDType };
    const na = n.args as { rows: number; dim: number; dtype: FloatDType; gradDtype?: FloatDType };
    if (sa.cols !== na.dim || sa.rows !== na.rows || sa.dtype !== na.dtype || wideDtype(sa.dtype, sa.gradDtype) !== wideDtype(na.dtype, na.gradDtype)) continue;
    const between = g.nodes.slice(norm.index + 1, sum.index);
    if (between.some((b) => b.inputs.includes(out.id) || b.outputs.includes(out.id))) continue;
    replaced.set(norm.index, {
      ...norm,
      inputs: [...new Set([...norm.inputs, out.id])],
      outputs: [...new Set([...norm.outputs, out.id])],
      attrs: { ...norm.attrs, operands: { ...n.operands, dXColSums: { id: out.id } } },
    });
    dropped.add(sum.index);
  }
  if (dropped.size === 0) return;
  g.setNodes(g.nodes.filter((n) => !dropped.has(n.index)).map((n) => replaced.get(n.index) ?? n));
}
