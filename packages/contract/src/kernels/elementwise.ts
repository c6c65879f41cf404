import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require } from "./spec.js";

/** add: out = a + b over n elements (residual connections, gradient sums). out may alias a or b. */
export interface AddArgs {
  a: Operand;
  b: Operand;
  out: Operand;
  n: number;
  dtype: FloatDType;
}

export const addSpec: KernelSpec<AddArgs> = {
  name: "add",
  operands: (a) => [operand("a", "in", a.dtype, a.n), operand("b", "in", a.dtype, a.n), operand("out", "out", a.dtype, a.n)],
  check: (a) => positiveInts("add", { n: a.n }),
  aliases: [
    ["out", "a"],
    ["out", "b"],
  ],
};

/** scale: out = alpha * x over n elements. out may alias x. */
export interface ScaleArgs {
  x: Operand;
  out: Operand;
  n: number;
  alpha: number;
  dtype: FloatDType;
}

export const scaleSpec: KernelSpec<ScaleArgs> = {
  name: "scale",
  operands: (a) => [operand("x", "in", a.dtype, a.n), operand("out", "out", a.dtype, a.n)],
  check: (a) => {
    positiveInts("scale", { n: a.n });
    require("scale", Number.isFinite(a.alpha), "alpha must be finite");
  },
  aliases: [["out", "x"]],
};
