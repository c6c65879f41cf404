import type { Graph, LowRankAdapter } from "../graph/graph.js";
import { dropout } from "./dropout.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, gradDtypeArg, kernelAttrs, operandOf } from "./grad-rule.js";

/**
 * Weight layouts: "out_in" is torch.nn.Linear's (out, in), y = x W^T;
 * "in_out" is GPT-2's Conv1D (in, out), y = x W.
 */
export type WeightLayout = "out_in" | "in_out";

/** y (N, out) = x (N, in) · W (+ bias). */
export function linear(g: Graph, x: number, w: number, bias: number | undefined, layout: WeightLayout, name: string): number {
  const [rows, inF] = g.info(x).shape;
  const ws = g.info(w).shape;
  const outF = layout === "out_in" ? ws[0] : ws[1];
  const wIn = layout === "out_in" ? ws[1] : ws[0];
  if (wIn !== inF) throw new Error(`${name}: input has ${inF} features, weight ${g.info(w).name} expects ${wIn}`);
  const y = g.tensor([rows, outF], g.info(x).dtype, "activation", name);
  addKernelNode(
    g,
    "matmul",
    { a: x, b: w, c: y, ...(bias === undefined ? {} : { bias }) },
    { m: rows, n: outF, k: inF, transB: layout === "out_in", dtype: g.info(x).dtype },
    { grad: "linear", extraAttrs: { layout } },
  );
  const adapter = g.adapters.get(w);
  if (adapter) addLowRankBranch(g, x, y, adapter, name);
  return y;
}

/**
 * LoRA's branch: y += scale · (dropout(x) · A^T) · B^T (dropout while training only), A (rank, in), B (out, rank), whatever the
 * base weight's layout. The second product adds into y (matmul's alpha and accumulate),
 * so y has two writers; its gradient reaches both products, the base one's and this one's.
 */
function addLowRankBranch(g: Graph, x: number, y: number, adapter: LowRankAdapter, name: string): void {
  const [rows, inF] = g.info(x).shape;
  const [rank] = g.info(adapter.a).shape;
  const outF = g.info(y).shape[1];
  const dtype = g.info(x).dtype;
  const down = g.tensor([rows, rank], dtype, "activation", `${name}.lora_a`);
  // LoRA's dropout acts on the branch's input alone; each branch draws its own mask (salted by its node's index).
  const input = adapter.dropout > 0 ? dropout(g, x, adapter.dropout, g.nodes.length + 1, `${name}.lora_dropout`) : x;
  addKernelNode(g, "matmul", { a: input, b: adapter.a, c: down }, { m: rows, n: rank, k: inF, transB: true, dtype }, { grad: "linear", extraAttrs: { layout: "out_in" } });
  addKernelNode(
    g,
    "matmul",
    { a: down, b: adapter.b, c: y },
    { m: rows, n: outF, k: rank, transB: true, alpha: adapter.scale, accumulate: true, dtype },
    { grad: "linear", extraAttrs: { layout: "out_in" } },
  );
  adapter.applied = true;
}

/**
 * y (N, count) = x (N, in) · W[firstRow : firstRow + count]^T (+ bias[firstRow : firstRow + count]):
 * one block of rows of an (out, in) weight, as when one projection feeds several branches
 * (Mamba2's and Mamba3's in_proj). Its gradients accumulate into the same rows of the
 * weight's and the bias' gradients.
 */
export function linearRows(g: Graph, x: number, w: number, firstRow: number, count: number, name: string, bias?: number): number {
  const [rows, inF] = g.info(x).shape;
  const [outF, wIn] = g.info(w).shape;
  if (wIn !== inF) throw new Error(`${name}: input has ${inF} features, weight ${g.info(w).name} expects ${wIn}`);
  if (firstRow < 0 || firstRow + count > outF) throw new Error(`${name}: rows ${firstRow}..${firstRow + count} are outside ${g.info(w).name}'s ${outF}`);
  const y = g.tensor([rows, count], g.info(x).dtype, "activation", name);
  addKernelNode(
    g,
    "matmul",
    { a: x, b: { id: w, offset: firstRow * inF }, c: y, ...(bias === undefined ? {} : { bias: { id: bias, offset: firstRow } }) },
    { m: rows, n: count, k: inF, transB: true, dtype: g.info(x).dtype },
    { grad: "linear", extraAttrs: { layout: "out_in" } },
  );
  return y;
}

/**
 * One (out, in) weight applied to each of `heads` slices of a row: x (N, heads·in) dense,
 * y (N, heads·out) with y[r, h] = x[r, h] · W^T (+ bias), a single product over N·heads rows
 * (Mamba3's MIMO projections of each head's channels).
 */
export function linearPerHead(g: Graph, x: number, w: number, bias: number | undefined, heads: number, name: string): number {
  const [rows, width] = g.info(x).shape;
  const [outF, inF] = g.info(w).shape;
  if (width !== heads * inF) throw new Error(`${name}: rows of ${width} are not ${heads} heads of ${inF} (${g.info(w).name})`);
  const y = g.tensor([rows, heads * outF], g.info(x).dtype, "activation", name);
  addKernelNode(
    g,
    "matmul",
    { a: x, b: w, c: y, ...(bias === undefined ? {} : { bias }) },
    { m: rows * heads, n: outF, k: inF, transB: true, dtype: g.info(x).dtype },
    { grad: "linear", extraAttrs: { layout: "out_in" } },
  );
  return y;
}

export const linearGrad: GradRule = (node, b, [dY]) => {
  if (dY === undefined) return;
  const g = b.graph;
  const a = kernelAttrs(node);
  const layout = node.attrs.layout as WeightLayout;
  const { m: rows, n: outF, k: inF } = a.args as { m: number; n: number; k: number };
  const x = operandOf(node, "a");
  const w = operandOf(node, "b");
  // A block of the weight's rows (linearRows): read and accumulate at the same place.
  const wOffset = a.operands.b.offset ?? 0;
  const dtype = g.info(x).dtype;
  // A product scaled by alpha (LoRA's second) passes alpha on to both gradients.
  const alpha = a.args.alpha === undefined || a.args.alpha === 1 ? {} : { alpha: a.args.alpha as number };
  if (b.needsGrad(x)) {
    const dX = b.activation([rows, inF], x, `d(${g.info(x).name})`);
    // dX (rows, in) = dY (rows, out) · W as (out, in)
    addKernelNode(g, "matmul", { a: dY, b: { id: w, offset: wOffset }, c: dX }, { m: rows, n: inF, k: outF, transB: layout === "in_out", dtype, ...alpha });
    b.addGrad(x, dX);
  }
  if (b.needsGrad(w)) {
    const dW = b.paramGrad(w);
    const cDtype = gradDtypeArg(g, dW, dtype, "cDtype");
    if (layout === "out_in") {
      // dW (out, in) += dY^T · x
      addKernelNode(g, "matmul", { a: dY, b: x, c: { id: dW, offset: wOffset } }, { m: outF, n: inF, k: rows, transA: true, accumulate: true, dtype, ...cDtype, ...alpha });
    } else {
      // dW (in, out) += x^T · dY
      addKernelNode(g, "matmul", { a: x, b: dY, c: dW }, { m: inF, n: outF, k: rows, transA: true, accumulate: true, dtype, ...cDtype, ...alpha });
    }
  }
  const bias = a.operands.bias?.id;
  if (bias !== undefined && b.needsGrad(bias)) {
    const dBias = b.paramGrad(bias);
    const out = { id: dBias, offset: a.operands.bias.offset ?? 0 };
    addKernelNode(g, "sumRows", { x: dY, out }, { rows, cols: outF, accumulate: true, dtype, ...gradDtypeArg(g, dBias, dtype) });
  }
};
