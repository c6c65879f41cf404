import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require, stridedExtent } from "./spec.js";

/**
 * Rotary position embedding, "rotate half" pairing (Hugging Face Llama):
 * x is (batch, seqLen, heads, headDim), token rows `rowStride` elements apart
 * (default heads*headDim; 3*hidden addresses q or k inside a packed qkv buffer).
 * For token t at position p = posOffset + t and i < headDim/2:
 *   freq_i = theta^(-2i/headDim),  a = p * freq_i
 *   out[i]           = x[i] cos a - x[i+half] sin a
 *   out[i+half]      = x[i+half] cos a + x[i] sin a
 * Backward is the same rotation by -a (dOut -> dX). out has x's layout and may alias it.
 */
export interface RopeArgs {
  x: Operand;
  out: Operand;
  batch: number;
  seqLen: number;
  heads: number;
  headDim: number;
  rowStride?: number;
  posOffset?: number;
  theta: number;
  dtype: FloatDType;
}

export type RopeForwardArgs = RopeArgs;
/** Same layout as RopeArgs with x = dOut and out = dX. */
export type RopeBackwardArgs = RopeArgs;

export function ropeRowStride(a: Omit<RopeArgs, "x" | "out">): number {
  return a.rowStride ?? a.heads * a.headDim;
}

function ropeSpec(name: string): KernelSpec<RopeArgs> {
  return {
    name,
    operands: (a) => {
      const ext = stridedExtent(a.batch * a.seqLen, a.heads * a.headDim, ropeRowStride(a));
      return [operand("x", "in", a.dtype, ext, { strided: true }), operand("out", "out", a.dtype, ext, { strided: true })];
    },
    check: (a) => {
      positiveInts(name, { batch: a.batch, seqLen: a.seqLen, heads: a.heads, headDim: a.headDim });
      require(name, a.headDim % 2 === 0, `headDim must be even, got ${a.headDim}`);
      require(name, ropeRowStride(a) >= a.heads * a.headDim, "rowStride must be >= heads*headDim");
      require(name, a.theta > 0, `theta must be > 0, got ${a.theta}`);
    },
    aliases: [["out", "x"]],
  };
}

export const ropeForwardSpec = ropeSpec("ropeForward");
export const ropeBackwardSpec = ropeSpec("ropeBackward");
