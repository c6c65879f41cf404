import { type FloatDType, wideDtype } from "@kiln/contract";
import type { Graph, GraphNode } from "./graph.js";
import { boundWhole, kernelNodeAttrs } from "./kernel-node.js";

type SumRowsArgs = { rows: number; cols: number; dtype: FloatDType; gradDtype?: FloatDType };

/**
 * Backward kernels that can sum the columns of the dX they write (their optional
 * `dXColSums`): the arguments that make them do it for a sumRows of `s`, or undefined
 * where their rows are not its rows.
 */
const SUMS_DX: Record<string, (own: Record<string, unknown>, s: SumRowsArgs) => Record<string, unknown> | undefined> = {
  layerNormBackward: normSums,
  rmsNormBackward: normSums,
  geluBackward: unarySums,
  siluBackward: unarySums,
};

/** A norm's rows are (rows, dim); its dXColSums are in its parameter gradients' dtype. */
function normSums(own: Record<string, unknown>, s: SumRowsArgs) {
  const n = own as { rows: number; dim: number; dtype: FloatDType; gradDtype?: FloatDType };
  const same = s.cols === n.dim && s.rows === n.rows && s.dtype === n.dtype && wideDtype(s.dtype, s.gradDtype) === wideDtype(n.dtype, n.gradDtype);
  return same ? own : undefined;
}

/** An element-wise gradient's n elements, read as rows of sumRows' cols, its sums in sumRows' dtype. */
function unarySums(own: Record<string, unknown>, s: SumRowsArgs) {
  const u = own as { n: number; dtype: FloatDType };
  if (s.rows * s.cols !== u.n || s.dtype !== u.dtype) return undefined;
  return { ...own, cols: s.cols, ...(s.gradDtype === undefined ? {} : { gradDtype: s.gradDtype }) };
}

/**
 * Drops each backward `sumRows` that sums the rows of a dX a norm or activation backward
 * wrote (the bias gradient of a linear layer whose output gradient that dX is: GPT-2's
 * attention and MLP output projections, whose outputs join the residual stream the next
 * norm reads, and its MLP input projection, whose output goes through GELU) into that
 * backward, which adds dX's column sums to the bias gradient as it writes dX: the rows
 * are not read again. Applies where no node between the two touches the bias gradient.
 * Run it on a finished graph (nodes are renumbered).
 */
export function fuseBiasGradients(g: Graph): void {
  const writers = g.writers();
  const dropped = new Set<number>();
  const replaced = new Map<number, Omit<GraphNode, "index">>();
  for (const sum of g.nodes) {
    const s = kernelNodeAttrs(sum);
    if (!sum.backward || s.kernel !== "sumRows" || !s.args.accumulate) continue;
    const { x, out } = s.operands;
    const w = writers.get(x.id);
    if (!boundWhole(x) || !boundWhole(out) || w?.length !== 1) continue;
    const writer = replaced.has(w[0]) ? undefined : g.nodes[w[0]];
    const n = writer && kernelNodeAttrs(writer);
    const sums = n && SUMS_DX[n.kernel];
    if (!writer || !n || !sums || writer.index > sum.index || n.operands.dXColSums || !boundWhole(n.operands.dX) || n.operands.dX.id !== x.id) continue;
    const args = sums(n.args, s.args as SumRowsArgs);
    if (!args) continue;
    const between = g.nodes.slice(writer.index + 1, sum.index);
    if (between.some((b) => b.inputs.includes(out.id) || b.outputs.includes(out.id))) continue;
    replaced.set(writer.index, {
      ...writer,
      inputs: [...new Set([...writer.inputs, out.id])],
      outputs: [...new Set([...writer.outputs, out.id])],
      attrs: { ...writer.attrs, operands: { ...n.operands, dXColSums: { id: out.id } }, args },
    });
    dropped.add(sum.index);
  }
  if (dropped.size === 0) return;
  g.setNodes(g.nodes.filter((n) => !dropped.has(n.index)).map((n) => replaced.get(n.index) ?? n));
}
