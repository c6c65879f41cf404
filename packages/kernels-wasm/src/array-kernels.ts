import type { ArrayCalls } from "./array-calls.js";

/** Rows of `dim` values: the shape every row-wise kernel takes. */
export interface RowShape {
  rows: number;
  dim: number;
}

function rowsOf(name: string, length: number, dim: number): number {
  if (!Number.isInteger(dim) || dim < 1 || length % dim !== 0) throw new RangeError(`${name}: length ${length} is not a multiple of dim ${dim}`);
  return length / dim;
}

/**
 * Transformer math on plain Float32Arrays (f32), copy in and out, every call on
 * all the kernels' threads. The same kernels the training backend runs.
 */
export class ArrayKernels {
  constructor(private readonly calls: ArrayCalls) {}

  /** Row softmax of x (rows x dim) with an optional temperature. */
  softmax(x: Float32Array, dim: number, temperature = 1): Float32Array {
    const out = new Float32Array(x.length);
    this.calls.run("softmaxForward", { x, out }, ["out"], { rows: rowsOf("softmax", x.length, dim), dim, temperature });
    return out;
  }

  /** LayerNorm of each row; returns the output and the per-row mean and 1/std. */
  layerNorm(x: Float32Array, weight: Float32Array, bias: Float32Array | undefined, eps = 1e-5) {
    const dim = weight.length;
    const rows = rowsOf("layerNorm", x.length, dim);
    const out = new Float32Array(x.length), mean = new Float32Array(rows), rstd = new Float32Array(rows);
    this.calls.run("layerNormForward", { x, weight, bias, out, mean, rstd }, ["out", "mean", "rstd"], { rows, dim, eps });
    return { out, mean, rstd };
  }

  /** RMSNorm of each row; returns the output and the per-row 1/rms. */
  rmsNorm(x: Float32Array, weight: Float32Array, eps = 1e-6) {
    const dim = weight.length;
    const rows = rowsOf("rmsNorm", x.length, dim);
    const out = new Float32Array(x.length), rstd = new Float32Array(rows);
    this.calls.run("rmsNormForward", { x, weight, out, rstd }, ["out", "rstd"], { rows, dim, eps });
    return { out, rstd };
  }

  /** GELU, tanh approximation (GPT-2). */
  gelu(x: Float32Array): Float32Array {
    return this.unary("geluForward", x);
  }

  /** SiLU (x * sigmoid(x)). */
  silu(x: Float32Array): Float32Array {
    return this.unary("siluForward", x);
  }

  /** silu(gate) * up (Llama's MLP gate). */
  swiGlu(gate: Float32Array, up: Float32Array): Float32Array {
    const out = new Float32Array(gate.length);
    this.calls.run("swiGluForward", { gate, up, out }, ["out"], { n: gate.length });
    return out;
  }

  /** Rotary embedding on x laid out (batch, seqLen, heads, headDim). */
  rope(x: Float32Array, shape: { batch: number; seqLen: number; heads: number; headDim: number; theta?: number; posOffset?: number }): Float32Array {
    const out = new Float32Array(x.length);
    this.calls.run("ropeForward", { x, out }, ["out"], { theta: 10000, ...shape });
    return out;
  }

  /**
   * Causal attention: q (batch, seqLen, heads, headDim), k (batch, seqLen, kvHeads,
   * headDim), v (batch, seqLen, kvHeads, vHeadDim; vHeadDim defaults to headDim).
   * Returns out (batch, seqLen, heads, vHeadDim) and the log-sum-exp per query.
   */
  attention(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    shape: { batch: number; seqLen: number; heads: number; kvHeads?: number; headDim: number; vHeadDim?: number; scale?: number },
  ) {
    const kvHeads = shape.kvHeads ?? shape.heads;
    const out = new Float32Array(shape.batch * shape.seqLen * shape.heads * (shape.vHeadDim ?? shape.headDim));
    const lse = new Float32Array(shape.batch * shape.heads * shape.seqLen);
    this.calls.run("attentionForward", { q, k, v, out, lse }, ["out", "lse"], { ...shape, kvHeads });
    return { out, lse };
  }

  /** Cross-entropy of each row of logits (rows x vocab) against targets (negative = ignored). */
  crossEntropy(logits: Float32Array, targets: Int32Array) {
    const rows = targets.length;
    const vocab = rowsOf("crossEntropy", logits.length, rows);
    const losses = new Float32Array(rows), lse = new Float32Array(rows);
    this.calls.run("crossEntropyForward", { logits, targets, losses, lse }, ["losses", "lse"], { rows, vocab });
    return { losses, lse };
  }

  add(a: Float32Array, b: Float32Array): Float32Array {
    const out = new Float32Array(a.length);
    this.calls.run("add", { a, b, out }, ["out"], { n: a.length });
    return out;
  }

  scale(x: Float32Array, alpha: number): Float32Array {
    const out = new Float32Array(x.length);
    this.calls.run("scale", { x, out }, ["out"], { n: x.length, alpha });
    return out;
  }

  sum(x: Float32Array): number {
    const out = new Float32Array(1);
    this.calls.run("sum", { x, out }, ["out"], { n: x.length });
    return out[0];
  }

  sumSquares(x: Float32Array): number {
    const out = new Float32Array(1);
    this.calls.run("sumSquares", { x, out }, ["out"], { n: x.length });
    return out[0];
  }

  /** One fused AdamW step, updating param, m and v in place. */
  adamW(param: Float32Array, grad: Float32Array, m: Float32Array, v: Float32Array, o: { lr: number; step: number; beta1?: number; beta2?: number; eps?: number; weightDecay?: number }): void {
    this.calls.run("adamW", { param, grad, m, v }, ["param", "m", "v"], { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, ...o, n: param.length });
  }

  private unary(kernel: "geluForward" | "siluForward", x: Float32Array): Float32Array {
    const out = new Float32Array(x.length);
    this.calls.run(kernel, { x, out }, ["out"], { n: x.length });
    return out;
  }
}
