import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require } from "./spec.js";

/*
 * Mixture-of-experts routing and token movement (dropless). T tokens, E experts,
 * each token routed to its top k. An assignment (t, j) is token t's j-th choice;
 * the T*k assignments are laid out grouped by expert ("slots"): expert e owns
 * slots [offsets[e], offsets[e+1]), in token order. Every index is i32.
 */

/**
 * moeRoute: per token t, from router logits (T, E):
 *   probs[t, :]   = softmax(logits[t, :])                              f32
 *   experts[t, j] = the j-th largest logit's expert (ties: lower index first)
 *   weights[t, j] = probs[t, experts[t, j]] / sum_j' probs[t, experts[t, j']]
 *   offsets[e]    = assignments to experts < e (offsets[E] = T*k)
 *   slots[t, j]   = offsets[experts[t, j]] + (assignments to that expert by tokens < t)
 *   auxLoss[0]    = alpha * E * sum_e f_e * P_e, f_e = count_e / (T*k), P_e = mean_t probs[t, e]
 * Choosing by logits (exact in every dtype) keeps the routing identical on every backend.
 */
export interface MoeRouteArgs {
  logits: Operand;
  probs: Operand;
  experts: Operand;
  weights: Operand;
  offsets: Operand;
  slots: Operand;
  auxLoss: Operand;
  tokens: number;
  numExperts: number;
  topK: number;
  /** Load-balancing loss coefficient (0 still writes auxLoss = 0). */
  alpha: number;
  dtype: FloatDType;
}

function checkRouting(kernel: string, a: { tokens: number; numExperts: number; topK: number }): void {
  positiveInts(kernel, { tokens: a.tokens, numExperts: a.numExperts, topK: a.topK });
  require(kernel, a.topK <= a.numExperts, `topK ${a.topK} must not exceed numExperts ${a.numExperts}`);
}

export const moeRouteSpec: KernelSpec<MoeRouteArgs> = {
  name: "moeRoute",
  operands: (a) => [
    operand("logits", "in", a.dtype, a.tokens * a.numExperts),
    operand("probs", "out", "f32", a.tokens * a.numExperts),
    operand("experts", "out", "i32", a.tokens * a.topK),
    operand("weights", "out", a.dtype, a.tokens * a.topK),
    operand("offsets", "out", "i32", a.numExperts + 1),
    operand("slots", "out", "i32", a.tokens * a.topK),
    operand("auxLoss", "out", "f32", 1),
  ],
  check: (a) => {
    checkRouting("moeRoute", a);
    require("moeRoute", Number.isFinite(a.alpha) && a.alpha >= 0, `alpha must be finite and >= 0, got ${a.alpha}`);
  },
};

/**
 * moeRouteBackward: dLogits (T, E) from the gradient of the routing weights and of auxLoss:
 *   dLogits[t, experts[t, j]] = w_j * (dWeights[t, j] - sum_j' w_j' * dWeights[t, j'])   (w = weights[t, :])
 *   dLogits[t, e]            += probs[t, e] * (g_e - sum_e' probs[t, e'] * g_e')
 * with g_e = auxScale * alpha * E * f_e / T (f_e from offsets), auxScale the gradient of auxLoss.
 * dLogits is written (not accumulated).
 */
export interface MoeRouteBackwardArgs {
  dWeights: Operand;
  weights: Operand;
  experts: Operand;
  probs: Operand;
  offsets: Operand;
  dLogits: Operand;
  tokens: number;
  numExperts: number;
  topK: number;
  alpha: number;
  /** d(total loss) / d(auxLoss): the loss scale the cross-entropy rows also get. */
  auxScale: number;
  dtype: FloatDType;
}

export const moeRouteBackwardSpec: KernelSpec<MoeRouteBackwardArgs> = {
  name: "moeRouteBackward",
  operands: (a) => [
    operand("dWeights", "in", a.dtype, a.tokens * a.topK),
    operand("weights", "in", a.dtype, a.tokens * a.topK),
    operand("experts", "in", "i32", a.tokens * a.topK, { init: { kind: "index", max: a.numExperts } }),
    operand("probs", "in", "f32", a.tokens * a.numExperts),
    operand("offsets", "in", "i32", a.numExperts + 1),
    operand("dLogits", "out", a.dtype, a.tokens * a.numExperts),
  ],
  check: (a) => {
    checkRouting("moeRouteBackward", a);
    require("moeRouteBackward", Number.isFinite(a.alpha) && Number.isFinite(a.auxScale), "alpha and auxScale must be finite");
  },
};

/** Token movement between token order (T rows) and slot order (T*k rows), rows of `dim`. */
interface MoeMoveDims {
  slots: Operand;
  tokens: number;
  topK: number;
  dim: number;
  dtype: FloatDType;
}

const checkMove = (kernel: string) => (a: MoeMoveDims) => positiveInts(kernel, { tokens: a.tokens, topK: a.topK, dim: a.dim });

/**
 * moeDispatch: out[slots[t, j], :] = scale[t, j] * x[t, :] (scale absent: 1).
 * x (T, dim) -> out (T*k, dim); slots is a permutation of 0..T*k-1, so every row of out is written once.
 * Moves tokens to their experts; also the backward of moeCombine (scale = the routing weights).
 */
export interface MoeDispatchArgs extends MoeMoveDims {
  x: Operand;
  scale?: Operand;
  out: Operand;
}

export const moeDispatchSpec: KernelSpec<MoeDispatchArgs> = {
  name: "moeDispatch",
  operands: (a) => [
    operand("x", "in", a.dtype, a.tokens * a.dim),
    operand("slots", "in", "i32", a.tokens * a.topK, { init: { kind: "permutation" } }),
    operand("scale", "in", a.dtype, a.tokens * a.topK, { optional: true }),
    operand("out", "out", a.dtype, a.tokens * a.topK * a.dim),
  ],
  check: checkMove("moeDispatch"),
};

/**
 * moeCombine: out[t, :] = (accumulate ? out[t, :] : 0) + sum_j scale[t, j] * x[slots[t, j], :] (scale absent: 1).
 * x (T*k, dim) -> out (T, dim), sums in f32 in j order. Brings expert outputs back to their
 * tokens, weighted; also the backward of moeDispatch.
 */
export interface MoeCombineArgs extends MoeMoveDims {
  x: Operand;
  scale?: Operand;
  out: Operand;
  accumulate?: boolean;
}

export const moeCombineSpec: KernelSpec<MoeCombineArgs> = {
  name: "moeCombine",
  operands: (a) => [
    operand("x", "in", a.dtype, a.tokens * a.topK * a.dim),
    operand("slots", "in", "i32", a.tokens * a.topK, { init: { kind: "permutation" } }),
    operand("scale", "in", a.dtype, a.tokens * a.topK, { optional: true }),
    operand("out", a.accumulate ? "inout" : "out", a.dtype, a.tokens * a.dim),
  ],
  check: checkMove("moeCombine"),
};

/**
 * moeCombineScaleGrad: dScale[t, j] = sum_d dOut[t, d] * x[slots[t, j], d] (f32 sums).
 * The gradient of moeCombine's weights: dOut (T, dim), x (T*k, dim) -> dScale (T, k).
 */
export interface MoeCombineScaleGradArgs extends MoeMoveDims {
  dOut: Operand;
  x: Operand;
  dScale: Operand;
}

export const moeCombineScaleGradSpec: KernelSpec<MoeCombineScaleGradArgs> = {
  name: "moeCombineScaleGrad",
  operands: (a) => [
    operand("dOut", "in", a.dtype, a.tokens * a.dim),
    operand("x", "in", a.dtype, a.tokens * a.topK * a.dim),
    operand("slots", "in", "i32", a.tokens * a.topK, { init: { kind: "permutation" } }),
    operand("dScale", "out", a.dtype, a.tokens * a.topK),
  ],
  check: checkMove("moeCombineScaleGrad"),
};
