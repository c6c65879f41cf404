import type { Graph } from "../graph/graph.js";
import { type BoundOperand, addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, kernelAttrs } from "./grad-rule.js";

/**
 * Where a (batch, rows, cols) block of elements lies in a tensor: `offset` elements
 * in, rows `rowStride` apart, batch items `batchStride` apart. A stride of 0 on the
 * source side repeats the same elements (broadcast).
 */
export interface BlockLayout {
  offset?: number;
  batchStride: number;
  rowStride: number;
}

export interface BlockShape {
  batch: number;
  rows: number;
  cols: number;
}

/** The dense layout of a (batch, rows, cols) block: rows cols apart, batch items rows*cols apart. */
export const denseBlock = (s: BlockShape): BlockLayout => ({ batchStride: s.rows * s.cols, rowStride: s.cols });

function copyArgs(s: BlockShape, from: BlockLayout, to: BlockLayout, dtype: string, accumulate: boolean) {
  return { ...s, srcBatchStride: from.batchStride, srcRowStride: from.rowStride, dstBatchStride: to.batchStride, dstRowStride: to.rowStride, accumulate, dtype };
}

/** A new dense tensor of `shape` holding the block of `src` at `from` (a slice of per-head slots, say). */
export function gatherBlock(g: Graph, src: number, from: BlockLayout, s: BlockShape, shape: readonly number[], name: string): number {
  const dtype = g.info(src).dtype;
  const out = g.tensor(shape, dtype, "activation", name);
  addKernelNode(g, "copyStrided", { src: { id: src, offset: from.offset ?? 0 }, dst: out }, copyArgs(s, from, denseBlock(s), dtype, false), { grad: "copyStrided" });
  return out;
}

/**
 * A new tensor of `shape` assembled from blocks of other tensors that together
 * cover it exactly (each element written once): zero-filled, then each block
 * added into its place. Multi-head latent attention builds its keys
 * [k_content | k_rope] per head this way.
 */
export function assembleBlocks(
  g: Graph,
  shape: readonly number[],
  parts: readonly { src: number; from: BlockLayout; to: BlockLayout; shape: BlockShape }[],
  name: string,
): number {
  const dtype = g.info(parts[0].src).dtype;
  const out = g.tensor(shape, dtype, "activation", name);
  addKernelNode(g, "fill", { out }, { n: g.elements(out), value: 0, dtype });
  for (const p of parts) {
    addKernelNode(g, "copyStrided", { src: { id: p.src, offset: p.from.offset ?? 0 }, dst: { id: out, offset: p.to.offset ?? 0 } }, copyArgs(p.shape, p.from, p.to, dtype, true), {
      grad: "copyStrided",
    });
  }
  return out;
}

/**
 * d(src) of a copy: the block of d(dst) copied back to where it came from. A
 * source repeated over rows (rowStride 0) gets the sum over those rows, as a
 * batched product with a row of ones. A source the block does not cover whole
 * gets zeros elsewhere. A copy that adds into dst passes d(dst) on unchanged to
 * what wrote dst before it, which the autodiff already does.
 */
export const copyStridedGrad: GradRule = (node, b, [dDst]) => {
  const a = kernelAttrs(node);
  const src = a.operands.src as BoundOperand;
  const dst = a.operands.dst as BoundOperand;
  if (dDst === undefined || !b.needsGrad(src.id)) return;
  const g = b.graph;
  const args = a.args as { batch: number; rows: number; cols: number; srcBatchStride: number; srcRowStride: number; dstBatchStride: number; dstRowStride: number; dtype: string };
  const s: BlockShape = { batch: args.batch, rows: args.rows, cols: args.cols };
  const from: BlockLayout = { offset: src.offset ?? 0, batchStride: args.srcBatchStride, rowStride: args.srcRowStride };
  const to: BlockLayout = { offset: dst.offset ?? 0, batchStride: args.dstBatchStride, rowStride: args.dstRowStride };
  const dtype = args.dtype;
  const dSrc = b.activation(g.info(src.id).shape, src.id, `d(${g.info(src.id).name})`);
  const dense = from.offset === 0 && from.rowStride === s.cols && from.batchStride === s.rows * s.cols && g.elements(src.id) === s.batch * s.rows * s.cols;
  if (from.rowStride === 0 && s.rows > 1) {
    // Broadcast over rows: gather the rows' gradients densely, then sum them with ones (1 x rows) · (rows x cols) per batch item.
    const covers = from.offset === 0 && from.batchStride === s.cols && g.elements(src.id) === s.batch * s.cols;
    if (!covers) throw new Error(`${g.info(src.id).name}: a source repeated over rows must be a dense (batch, cols) tensor`);
    const rowsGrad = b.activation([s.batch * s.rows * s.cols], dDst, `d(${g.info(src.id).name}).rows`);
    addKernelNode(g, "copyStrided", { src: { id: dDst, offset: to.offset }, dst: rowsGrad }, copyArgs(s, to, denseBlock(s), dtype, false));
    const ones = b.activation([s.rows], dDst, `${g.info(src.id).name}.ones`);
    addKernelNode(g, "fill", { out: ones }, { n: s.rows, value: 1, dtype });
    addKernelNode(g, "matmul", { a: ones, b: rowsGrad, c: dSrc }, { m: 1, n: s.cols, k: s.rows, batch: s.batch, strideA: 0, strideB: s.rows * s.cols, strideC: s.cols, dtype });
  } else {
    if (!dense) addKernelNode(g, "fill", { out: dSrc }, { n: g.elements(src.id), value: 0, dtype });
    addKernelNode(g, "copyStrided", { src: { id: dDst, offset: to.offset }, dst: { id: dSrc, offset: from.offset } }, copyArgs(s, to, from, dtype, !dense));
  }
  b.addGrad(src.id, dSrc);
};
