import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, wideDtype } from "./spec.js";

/**
 * embeddingForward: out[i, :] = table[ids[i], :]
 * ids: i32 (count), each in [0, vocab); table: (vocab, dim); out: (count, dim).
 * Positional embeddings are the same kernel with ids = positions.
 */
export interface EmbeddingForwardArgs {
  ids: Operand;
  table: Operand;
  out: Operand;
  count: number;
  vocab: number;
  dim: number;
  dtype: FloatDType;
}

export const embeddingForwardSpec: KernelSpec<EmbeddingForwardArgs> = {
  name: "embeddingForward",
  operands: (a) => [
    operand("ids", "in", "i32", a.count, { init: { kind: "index", max: a.vocab } }),
    operand("table", "in", a.dtype, a.vocab * a.dim),
    operand("out", "out", a.dtype, a.count * a.dim),
  ],
  check: (a) => positiveInts("embeddingForward", { count: a.count, vocab: a.vocab, dim: a.dim }),
};

/**
 * embeddingBackward: dTable[ids[i], :] += dOut[i, :] for every i (repeated ids add up).
 * dTable accumulates, like every parameter gradient, in `gradDtype` (`dtype` or f32); sums in f32.
 */
export interface EmbeddingBackwardArgs {
  ids: Operand;
  dOut: Operand;
  dTable: Operand;
  count: number;
  vocab: number;
  dim: number;
  dtype: FloatDType;
  /** Dtype of the parameter gradients written here: `dtype` (default) or f32 (mixed precision). */
  gradDtype?: FloatDType;
}

export const embeddingBackwardSpec: KernelSpec<EmbeddingBackwardArgs> = {
  name: "embeddingBackward",
  operands: (a) => [
    operand("ids", "in", "i32", a.count, { init: { kind: "index", max: a.vocab } }),
    operand("dOut", "in", a.dtype, a.count * a.dim),
    operand("dTable", "inout", wideDtype(a.dtype, a.gradDtype), a.vocab * a.dim),
  ],
  check: (a) => {
    positiveInts("embeddingBackward", { count: a.count, vocab: a.vocab, dim: a.dim });
    checkWideDtype("embeddingBackward", "gradDtype", a.dtype, a.gradDtype);
  },
};
