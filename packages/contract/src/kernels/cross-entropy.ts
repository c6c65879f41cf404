import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require } from "./spec.js";

/**
 * Fused softmax + cross-entropy over rows of logits (rows, vocab):
 *   lse[r] = log sum_j exp(logits[r,j]);  losses[r] = lse[r] - logits[r, targets[r]]
 * targets: i32, in [0, vocab) or negative = ignored (loss 0). losses, lse: f32 (rows).
 * With `dLogits` (and `lossScale`), the call also writes crossEntropyBackward's dLogits
 * from the lse it has just computed, so a training loss reads its logits once: the
 * result is that of this kernel followed by crossEntropyBackward (the WebAssembly and
 * CUDA kernels feed the backward the f32 lse they store: the same bits as the two
 * calls). dLogits may alias logits.
 */
export interface CrossEntropyForwardArgs {
  logits: Operand;
  targets: Operand;
  losses: Operand;
  lse: Operand;
  dLogits?: Operand;
  rows: number;
  vocab: number;
  /** dLogits' scale (crossEntropyBackward's lossScale); 1 when left out. */
  lossScale?: number;
  dtype: FloatDType;
}

export const crossEntropyForwardSpec: KernelSpec<CrossEntropyForwardArgs> = {
  name: "crossEntropyForward",
  operands: (a) => [
    operand("logits", "in", a.dtype, a.rows * a.vocab, { init: { kind: "uniform", lo: -6, hi: 6 } }),
    operand("targets", "in", "i32", a.rows, { init: { kind: "target", max: a.vocab } }),
    operand("losses", "out", "f32", a.rows),
    operand("lse", "out", "f32", a.rows),
    operand("dLogits", "out", a.dtype, a.rows * a.vocab, { optional: true }),
  ],
  check: (a) => {
    positiveInts("crossEntropyForward", { rows: a.rows, vocab: a.vocab });
    require("crossEntropyForward", a.lossScale === undefined || Number.isFinite(a.lossScale), "lossScale must be finite");
    require("crossEntropyForward", a.lossScale === undefined || a.dLogits !== undefined, "lossScale scales dLogits: pass dLogits with it, or leave both out");
  },
  aliases: [["dLogits", "logits"]],
};

/**
 * dLogits[r,j] = lossScale * (exp(logits[r,j] - lse[r]) - [j == targets[r]]), 0 for ignored rows.
 * lossScale is the gradient of the total loss w.r.t. each row's loss (1/validRows for a mean).
 * dLogits may alias logits (the logits buffer is then reused for its gradient).
 */
export interface CrossEntropyBackwardArgs {
  logits: Operand;
  targets: Operand;
  lse: Operand;
  dLogits: Operand;
  rows: number;
  vocab: number;
  lossScale: number;
  dtype: FloatDType;
}

export const crossEntropyBackwardSpec: KernelSpec<CrossEntropyBackwardArgs> = {
  name: "crossEntropyBackward",
  operands: (a) => [
    operand("logits", "in", a.dtype, a.rows * a.vocab, { init: { kind: "uniform", lo: -6, hi: 6 } }),
    operand("targets", "in", "i32", a.rows, { init: { kind: "target", max: a.vocab } }),
    operand("lse", "in", "f32", a.rows),
    operand("dLogits", "out", a.dtype, a.rows * a.vocab),
  ],
  check: (a) => {
    positiveInts("crossEntropyBackward", { rows: a.rows, vocab: a.vocab });
    require("crossEntropyBackward", Number.isFinite(a.lossScale), "lossScale must be finite");
  },
  aliases: [["dLogits", "logits"]],
};

/**
 * Row softmax with temperature (sampling): out[r,j] = exp(x[r,j]/T - max) / sum.
 * out may alias x.
 */
export interface SoftmaxForwardArgs {
  x: Operand;
  out: Operand;
  rows: number;
  dim: number;
  temperature?: number;
  dtype: FloatDType;
}

export const softmaxForwardSpec: KernelSpec<SoftmaxForwardArgs> = {
  name: "softmaxForward",
  operands: (a) => [
    operand("x", "in", a.dtype, a.rows * a.dim, { init: { kind: "uniform", lo: -8, hi: 8 } }),
    operand("out", "out", a.dtype, a.rows * a.dim),
  ],
  check: (a) => {
    positiveInts("softmaxForward", { rows: a.rows, dim: a.dim });
    require("softmaxForward", (a.temperature ?? 1) > 0, `temperature must be > 0, got ${a.temperature}`);
  },
  aliases: [["out", "x"]],
};
