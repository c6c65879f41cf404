import type { Operand } from "../backend.js";
import type { DType, FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require } from "./spec.js";
import { isFloatDType } from "../dtype.js";

/** cast: dst[i] = src[i] converted from srcDtype to dstDtype (round to nearest even). */
export interface CastArgs {
  src: Operand;
  dst: Operand;
  n: number;
  srcDtype: FloatDType;
  dstDtype: FloatDType;
}

export const castSpec: KernelSpec<CastArgs> = {
  name: "cast",
  operands: (a) => [operand("src", "in", a.srcDtype, a.n, { init: { kind: "uniform", lo: -300, hi: 300 } }), operand("dst", "out", a.dstDtype, a.n)],
  check: (a) => positiveInts("cast", { n: a.n }),
};

/** fill: out[i] = value for i < n; value must be representable (an integer for i32/u32/u16). */
export interface FillArgs {
  out: Operand;
  n: number;
  value: number;
  dtype: DType;
}

export const fillSpec: KernelSpec<FillArgs> = {
  name: "fill",
  operands: (a) => [operand("out", "out", a.dtype, a.n)],
  check: (a) => {
    positiveInts("fill", { n: a.n });
    require("fill", isFloatDType(a.dtype) || Number.isInteger(a.value), `value ${a.value} is not an integer for ${a.dtype}`);
  },
};

/**
 * checkFinite: flag[0] = 1 when any of x[0..n) is NaN or infinite; otherwise flag is
 * left as it was (so one flag collects many buffers). flag is i32.
 */
export interface CheckFiniteArgs {
  x: Operand;
  flag: Operand;
  n: number;
  dtype: FloatDType;
}

export const checkFiniteSpec: KernelSpec<CheckFiniteArgs> = {
  name: "checkFinite",
  operands: (a) => [operand("x", "in", a.dtype, a.n), operand("flag", "inout", "i32", 1, { init: { kind: "index", max: 2 } })],
  check: (a) => positiveInts("checkFinite", { n: a.n }),
};
