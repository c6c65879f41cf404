import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts } from "./spec.js";

/**
 * Whole-buffer reductions into one f32: sum: out = (acc ? out : 0) + sum_i x[i];
 * sumSquares: out = (acc ? out : 0) + sum_i x[i]^2 (global gradient norm for clipping:
 * accumulate over every gradient, then sqrt on the host). Sums in f32 or wider.
 */
export interface ReduceArgs {
  x: Operand;
  out: Operand;
  n: number;
  accumulate?: boolean;
  dtype: FloatDType;
}

function reduceSpec(name: string): KernelSpec<ReduceArgs> {
  return {
    name,
    operands: (a) => [operand("x", "in", a.dtype, a.n), operand("out", a.accumulate ? "inout" : "out", "f32", 1)],
    check: (a) => positiveInts(name, { n: a.n }),
  };
}

export type SumArgs = ReduceArgs;
export type SumSquaresArgs = ReduceArgs;
export const sumSpec = reduceSpec("sum");
export const sumSquaresSpec = reduceSpec("sumSquares");
