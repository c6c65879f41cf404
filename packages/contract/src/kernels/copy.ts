import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require, stridedExtent } from "./spec.js";

/**
 * copyStrided: a (batch, rows, cols) block of elements from one strided layout to another.
 *   for b < batch, r < rows, c < cols:
 *     dst[b*dstBatchStride + r*dstRowStride + c]  =  (accumulate ? that element : 0)
 *                                                   + src[b*srcBatchStride + r*srcRowStride + c]
 * Strides count elements from each operand's start (its buffer + byteOffset). A src
 * stride of 0 repeats (broadcasts) the same source elements; multi-head latent attention
 * builds K[t, h, :] = [k_nope(t, h) | k_rope(t)] with srcRowStride 0 for the rope part.
 * accumulate adds in f32 and rounds once to the 16-bit dtypes. No reduction: every dst
 * element named has exactly one source element, which copyStrided.check guarantees by
 * asking the dst strides to nest in one of two orders, each extent fitting inside the
 * next stride (a dimension of 1 needs no stride):
 *   batch outer: dstRowStride >= cols  and  dstBatchStride >= (rows-1)*dstRowStride + cols
 *   rows outer:  dstBatchStride >= cols  and  dstRowStride >= (batch-1)*dstBatchStride + cols
 * Both operands span (batch-1)*batchStride + (rows-1)*rowStride + cols elements; src and
 * dst must not overlap (no in-place form). Strides are non-negative integers.
 */
export interface CopyStridedArgs {
  src: Operand;
  dst: Operand;
  batch: number;
  rows: number;
  cols: number;
  srcBatchStride: number;
  srcRowStride: number;
  dstBatchStride: number;
  dstRowStride: number;
  accumulate?: boolean;
  dtype: FloatDType;
}

/** Elements a strided (batch, rows, cols) block spans from its first element. */
export function copyStridedExtent(batch: number, rows: number, cols: number, batchStride: number, rowStride: number): number {
  return stridedExtent(batch, stridedExtent(rows, cols, rowStride), batchStride);
}

/** Whether every (b, r, c) names its own dst element: one of the two nestings of copyStrided holds. */
export function copyStridedDisjoint(a: Pick<CopyStridedArgs, "batch" | "rows" | "cols" | "dstBatchStride" | "dstRowStride">): boolean {
  const { batch, rows, cols, dstBatchStride: bs, dstRowStride: rs } = a;
  const batchOuter = (rows === 1 || rs >= cols) && (batch === 1 || bs >= stridedExtent(rows, cols, rs));
  const rowsOuter = (batch === 1 || bs >= cols) && (rows === 1 || rs >= stridedExtent(batch, cols, bs));
  return batchOuter || rowsOuter;
}

export const copyStridedSpec: KernelSpec<CopyStridedArgs> = {
  name: "copyStrided",
  operands: (a) => [
    operand("src", "in", a.dtype, copyStridedExtent(a.batch, a.rows, a.cols, a.srcBatchStride, a.srcRowStride)),
    operand("dst", a.accumulate ? "inout" : "out", a.dtype, copyStridedExtent(a.batch, a.rows, a.cols, a.dstBatchStride, a.dstRowStride)),
  ],
  check: (a) => {
    positiveInts("copyStrided", { batch: a.batch, rows: a.rows, cols: a.cols });
    const strides = { srcBatchStride: a.srcBatchStride, srcRowStride: a.srcRowStride, dstBatchStride: a.dstBatchStride, dstRowStride: a.dstRowStride };
    for (const [k, v] of Object.entries(strides)) {
      require("copyStrided", Number.isSafeInteger(v) && v >= 0, `${k} must be a non-negative integer, got ${v}`);
    }
    require(
      "copyStrided",
      copyStridedDisjoint(a),
      `dst strides (batch ${a.dstBatchStride}, row ${a.dstRowStride}) let two of the ${a.batch} x ${a.rows} x ${a.cols} elements land on one: ` +
        `need dstRowStride >= cols and dstBatchStride >= (rows-1)*dstRowStride + cols, or dstBatchStride >= cols and dstRowStride >= (batch-1)*dstBatchStride + cols`,
    );
  },
};
