import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, checkWideDtype, operand, positiveInts, require, wideDtype } from "./spec.js";

/** Element-wise unary op over n elements: out = f(x). out may alias x. */
export interface UnaryForwardArgs {
  x: Operand;
  out: Operand;
  n: number;
  dtype: FloatDType;
}

/**
 * Element-wise unary gradient: dX = f'(x) * dOut. dX may alias dOut.
 * With `cols` and `dXColSums`, the n elements are rows of `cols` and dXColSums (cols,
 * in `gradDtype`: `dtype` or f32) accumulates dX's column sums, dX as stored:
 *   dXColSums[j] += sum_r dX[r, j]
 * (the bias gradient of the linear layer whose output went through f, in one pass).
 */
export interface UnaryBackwardArgs {
  x: Operand;
  dOut: Operand;
  dX: Operand;
  dXColSums?: Operand;
  n: number;
  /** Row length of dX for dXColSums (n a multiple of it). */
  cols?: number;
  dtype: FloatDType;
  /** dXColSums' dtype: `dtype` (default) or f32. */
  gradDtype?: FloatDType;
}

function unaryForwardSpec(name: string): KernelSpec<UnaryForwardArgs> {
  return {
    name,
    operands: (a) => [operand("x", "in", a.dtype, a.n, { init: { kind: "uniform", lo: -4, hi: 4 } }), operand("out", "out", a.dtype, a.n)],
    check: (a) => positiveInts(name, { n: a.n }),
    aliases: [["out", "x"]],
  };
}

function unaryBackwardSpec(name: string): KernelSpec<UnaryBackwardArgs> {
  return {
    name,
    operands: (a) => [
      operand("x", "in", a.dtype, a.n, { init: { kind: "uniform", lo: -4, hi: 4 } }),
      operand("dOut", "in", a.dtype, a.n),
      operand("dX", "out", a.dtype, a.n),
      operand("dXColSums", "inout", wideDtype(a.dtype, a.gradDtype), a.cols ?? 0, { optional: true }),
    ],
    check: (a) => {
      positiveInts(name, { n: a.n, cols: a.cols });
      checkWideDtype(name, "gradDtype", a.dtype, a.gradDtype);
      require(name, a.dXColSums === undefined || (a.cols !== undefined && a.n % a.cols === 0), `dXColSums needs cols dividing n (${a.n}), got ${String(a.cols)}`);
    },
    aliases: [["dX", "dOut"]],
  };
}

/**
 * GELU, tanh approximation (GPT-2; PyTorch `gelu(approximate="tanh")`):
 *   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 */
export const geluForwardSpec = unaryForwardSpec("geluForward");
export const geluBackwardSpec = unaryBackwardSpec("geluBackward");

/** SiLU: silu(x) = x * sigmoid(x);  silu'(x) = s (1 + x (1 - s)), s = sigmoid(x). */
export const siluForwardSpec = unaryForwardSpec("siluForward");
export const siluBackwardSpec = unaryBackwardSpec("siluBackward");

/**
 * Gated linear unit of the Llama MLP: out = act(gate) * up, over n elements, with act
 * SiLU (SwiGLU, the default) or `activation: "gelu"`, the tanh GELU (GeGLU: Gemma's
 * gelu_pytorch_tanh). gate and up may be slices of one (rows, 2*inner) buffer only when each
 * is contiguous.
 */
export interface SwiGluForwardArgs {
  gate: Operand;
  up: Operand;
  out: Operand;
  n: number;
  /** The gate's activation: "silu" (default) or "gelu" (tanh approximation). */
  activation?: GateActivation;
  dtype: FloatDType;
}

export const GATE_ACTIVATIONS = ["silu", "gelu"] as const;
export type GateActivation = (typeof GATE_ACTIVATIONS)[number];

function checkGate(name: string, a: { n: number; activation?: string }): void {
  positiveInts(name, { n: a.n });
  require(name, a.activation === undefined || (GATE_ACTIVATIONS as readonly string[]).includes(a.activation), `activation must be one of ${GATE_ACTIVATIONS.join(", ")}, got ${String(a.activation)}`);
}

export const swiGluForwardSpec: KernelSpec<SwiGluForwardArgs> = {
  name: "swiGluForward",
  operands: (a) => [
    operand("gate", "in", a.dtype, a.n, { init: { kind: "uniform", lo: -4, hi: 4 } }),
    operand("up", "in", a.dtype, a.n),
    operand("out", "out", a.dtype, a.n),
  ],
  check: (a) => checkGate("swiGluForward", a),
};

/** dGate = dOut * up * act'(gate);  dUp = dOut * act(gate). Both overwritten. */
export interface SwiGluBackwardArgs {
  gate: Operand;
  up: Operand;
  dOut: Operand;
  dGate: Operand;
  dUp: Operand;
  n: number;
  activation?: GateActivation;
  dtype: FloatDType;
}

export const swiGluBackwardSpec: KernelSpec<SwiGluBackwardArgs> = {
  name: "swiGluBackward",
  operands: (a) => [
    operand("gate", "in", a.dtype, a.n, { init: { kind: "uniform", lo: -4, hi: 4 } }),
    operand("up", "in", a.dtype, a.n),
    operand("dOut", "in", a.dtype, a.n),
    operand("dGate", "out", a.dtype, a.n),
    operand("dUp", "out", a.dtype, a.n),
  ],
  check: (a) => checkGate("swiGluBackward", a),
};
