import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, require, wideDtype } from "./spec.js";

/**
 * Fused AdamW step (decoupled weight decay, as torch.optim.AdamW), per element:
 *   g = grad * gradScale                      (clipping and loss-scale undo folded in)
 *   w = master ?? param                       (f32 master weights under mixed precision)
 *   w = w - lr * weightDecay * w
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   w = w - lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
 *   master = w (if given);  param = w rounded to dtype
 * param is in `dtype`, grad in `gradDtype` (`dtype`, or f32 for a 16-bit dtype: mixed
 * precision's f32 gradients, with the 16-bit parameters rounded from the f32 masters in
 * the same pass); m, v, master are f32. step counts from 1.
 */
export interface AdamWArgs {
  param: Operand;
  grad: Operand;
  m: Operand;
  v: Operand;
  master?: Operand;
  n: number;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  step: number;
  gradScale?: number;
  dtype: FloatDType;
  /** Dtype of grad: `dtype` (default) or f32. */
  gradDtype?: FloatDType;
}

export const adamWSpec: KernelSpec<AdamWArgs> = {
  name: "adamW",
  operands: (a) => [
    operand("param", "inout", a.dtype, a.n),
    operand("grad", "in", wideDtype(a.dtype, a.gradDtype), a.n),
    operand("m", "inout", "f32", a.n, { init: { kind: "uniform", lo: -0.1, hi: 0.1 } }),
    operand("v", "inout", "f32", a.n, { init: { kind: "uniform", lo: 0, hi: 0.05 } }),
    operand("master", "inout", "f32", a.n, { optional: true }),
  ],
  check: (a) => {
    positiveInts("adamW", { n: a.n, step: a.step });
    checkWideDtype("adamW", "gradDtype", a.dtype, a.gradDtype);
    require("adamW", a.beta1 >= 0 && a.beta1 < 1, `beta1 must be in [0, 1), got ${a.beta1}`);
    require("adamW", a.beta2 >= 0 && a.beta2 < 1, `beta2 must be in [0, 1), got ${a.beta2}`);
    require("adamW", a.eps > 0, `eps must be > 0, got ${a.eps}`);
    require("adamW", a.lr >= 0 && Number.isFinite(a.lr), `lr must be finite and >= 0, got ${a.lr}`);
  },
};
