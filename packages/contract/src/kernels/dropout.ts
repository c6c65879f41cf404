import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require } from "./spec.js";

/**
 * dropout: out[i] = keep(i) ? x[i] * scale : 0 over n elements, scale = 1 / (1 - p) rounded
 * to f32. Whether element i is kept depends only on (seed, i), through u32 arithmetic every
 * backend does alike:
 *   mix(z) = z ^= z >> 16; z *= 0x7feb352d; z ^= z >> 15; z *= 0x846ca68b; z ^= z >> 16
 *   keep(i) = (mix(i ^ mix(seed)) >> 8) >= ceil(p * 2^24)   (dropoutThreshold: 24-bit uniforms against p)
 * so the backward (dX from dOut) is the same call with the same seed, and a step's masks
 * come out the same on every backend and thread count. out may alias x. p = 0 copies x.
 */
export interface DropoutArgs {
  x: Operand;
  out: Operand;
  n: number;
  /** Probability of zeroing an element, in [0, 1). */
  p: number;
  /** u32. */
  seed: number;
  dtype: FloatDType;
}

/** mix() of the contract's dropout: a 32-bit integer hash (Wellons' lowbias32). */
export function dropoutMix(z: number): number {
  z = (z ^ (z >>> 16)) >>> 0;
  z = Math.imul(z, 0x7feb352d) >>> 0;
  z = (z ^ (z >>> 15)) >>> 0;
  z = Math.imul(z, 0x846ca68b) >>> 0;
  return (z ^ (z >>> 16)) >>> 0;
}

/** The 24-bit threshold an element's hash must reach to be kept: ceil(p * 2^24), computed in f64. */
export const dropoutThreshold = (p: number) => Math.ceil(p * 2 ** 24);

/** Whether dropout with (p, seed) keeps element i. */
export function dropoutKeeps(p: number, seed: number, i: number): boolean {
  return dropoutMix((i ^ dropoutMix(seed)) >>> 0) >>> 8 >= dropoutThreshold(p);
}

/** The factor kept elements are multiplied by: 1 / (1 - p) in f32. */
export const dropoutScale = (p: number) => Math.fround(1 / (1 - p));

export const dropoutSpec: KernelSpec<DropoutArgs> = {
  name: "dropout",
  operands: (a) => [operand("x", "in", a.dtype, a.n), operand("out", "out", a.dtype, a.n)],
  check: (a) => {
    positiveInts("dropout", { n: a.n });
    require("dropout", a.p >= 0 && a.p < 1, `p must be in [0, 1), got ${a.p}`);
    require("dropout", Number.isInteger(a.seed) && a.seed >= 0 && a.seed <= 0xffffffff, `seed must be a u32, got ${a.seed}`);
  },
  aliases: [["out", "x"]],
};
