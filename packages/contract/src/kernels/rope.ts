import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require, stridedExtent } from "./spec.js";

/**
 * Rotary position embedding, "rotate half" pairing (Hugging Face Llama):
 * x is (batch, seqLen, heads, headDim), token rows `rowStride` elements apart
 * (default heads*headDim; 3*hidden addresses q or k inside a packed qkv buffer).
 * For token t at position p = posOffset + t (in packed rows, p = posOffset + t - docStarts[t]:
 * each document's tokens count from 0, docStarts as in attention) and i < headDim/2:
 *   freq_i = theta^(-2i/headDim),  a = p * freq_i
 *   out[i]           = x[i] cos a - x[i+half] sin a
 *   out[i+half]      = x[i+half] cos a + x[i] sin a
 * Backward is the same rotation by -a (dOut -> dX). out has x's layout and may alias it.
 * `scaling` replaces freq_i by a scaled frequency (ropeInvFreq): Llama 3's and linear
 * position interpolation, as transformers computes them for rope_scaling.
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
  /** Packed rows: where each token's document begins in its row (i32, batch x seqLen); positions count from there. */
  docStarts?: Operand;
  theta: number;
  scaling?: RopeScaling;
  dtype: FloatDType;
}

/**
 * Frequency scaling of rope_scaling (transformers' rope_type):
 *   linear: freq_i / factor (positions interpolated by factor);
 *   llama3: with wavelength w_i = 2 pi / freq_i, L = originalMaxPositions,
 *     w_i < L / highFreqFactor: freq_i (high frequencies kept),
 *     w_i > L / lowFreqFactor:  freq_i / factor,
 *     between: (1 - s) freq_i / factor + s freq_i, s = (L / w_i - lowFreqFactor) / (highFreqFactor - lowFreqFactor).
 */
export type RopeScaling =
  | { type: "linear"; factor: number }
  | { type: "llama3"; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositions: number };

/** freq_i for i < headDim/2 in f64: theta^(-2i/headDim), then `scaling`. Kernels rotate by position * freq_i. */
export function ropeInvFreq(a: Pick<RopeArgs, "headDim" | "theta" | "scaling">): Float64Array {
  const half = a.headDim / 2;
  const f = new Float64Array(half);
  const sc = a.scaling;
  for (let i = 0; i < half; i++) {
    const base = a.theta ** ((-2 * i) / a.headDim);
    if (!sc) f[i] = base;
    else if (sc.type === "linear") f[i] = base / sc.factor;
    else {
      const wavelength = (2 * Math.PI) / base;
      const L = sc.originalMaxPositions;
      if (wavelength < L / sc.highFreqFactor) f[i] = base;
      else if (wavelength > L / sc.lowFreqFactor) f[i] = base / sc.factor;
      else {
        const s = (L / wavelength - sc.lowFreqFactor) / (sc.highFreqFactor - sc.lowFreqFactor);
        f[i] = ((1 - s) * base) / sc.factor + s * base;
      }
    }
  }
  return f;
}

function checkScaling(name: string, sc: RopeScaling | undefined): void {
  if (!sc) return;
  require(name, sc.factor > 0, `scaling.factor must be > 0, got ${sc.factor}`);
  if (sc.type === "llama3") {
    require(name, sc.lowFreqFactor > 0 && sc.highFreqFactor > sc.lowFreqFactor, `scaling needs 0 < lowFreqFactor < highFreqFactor, got ${sc.lowFreqFactor} and ${sc.highFreqFactor}`);
    require(name, sc.originalMaxPositions > 0, `scaling.originalMaxPositions must be > 0, got ${sc.originalMaxPositions}`);
  }
}

export type RopeForwardArgs = RopeArgs;
/** Same layout as RopeArgs with x = dOut and out = dX. */
export type RopeBackwardArgs = RopeArgs;

export function ropeRowStride(a: Omit<RopeArgs, "x" | "out" | "docStarts">): number {
  return a.rowStride ?? a.heads * a.headDim;
}

function ropeSpec(name: string): KernelSpec<RopeArgs> {
  return {
    name,
    operands: (a) => {
      const ext = stridedExtent(a.batch * a.seqLen, a.heads * a.headDim, ropeRowStride(a));
      return [
        operand("x", "in", a.dtype, ext, { strided: true }),
        operand("out", "out", a.dtype, ext, { strided: true }),
        operand("docStarts", "in", "i32", a.batch * a.seqLen, { optional: true, init: { kind: "documentStarts", seqLen: a.seqLen } }),
      ];
    },
    check: (a) => {
      positiveInts(name, { batch: a.batch, seqLen: a.seqLen, heads: a.heads, headDim: a.headDim });
      require(name, a.headDim % 2 === 0, `headDim must be even, got ${a.headDim}`);
      require(name, ropeRowStride(a) >= a.heads * a.headDim, "rowStride must be >= heads*headDim");
      require(name, a.theta > 0, `theta must be > 0, got ${a.theta}`);
      checkScaling(name, a.scaling);
    },
    aliases: [["out", "x"]],
  };
}

export const ropeForwardSpec = ropeSpec("ropeForward");
export const ropeBackwardSpec = ropeSpec("ropeBackward");
