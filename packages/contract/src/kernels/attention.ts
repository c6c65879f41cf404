import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require, stridedExtent } from "./spec.js";

/**
 * Causal scaled-dot-product attention, GQA aware.
 * Layouts (row-major, one row per token):
 *   q, out: (batch, seqLen, heads,   headDim), rows qRowStride / outRowStride apart
 *   k, v:   (batch, seqLen, kvHeads, headDim), rows kvRowStride apart
 *   lse:    (batch, heads, seqLen) f32, log-sum-exp of each query's scaled scores
 * Default strides are dense; a packed GPT-2 qkv buffer (B, T, 3C) is addressed as
 * three slices at element offsets 0, C, 2C with qRowStride = kvRowStride = 3C.
 * Query head h reads kv head floor(h / (heads / kvHeads)).
 *   s[t,u] = scale * q[t]·k[u] for u <= t;  p = softmax_u(s);  out[t] = sum_u p[t,u] v[u]
 * scale defaults to 1/sqrt(headDim). Scores and sums in f32; nothing of size
 * seqLen x seqLen needs to exist beyond one tile.
 */
export interface AttentionForwardArgs {
  q: Operand;
  k: Operand;
  v: Operand;
  out: Operand;
  lse: Operand;
  batch: number;
  seqLen: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  qRowStride?: number;
  kvRowStride?: number;
  outRowStride?: number;
  scale?: number;
  dtype: FloatDType;
}

/**
 * Gradients of attentionForward. With D[t] = dOut[t]·out[t]:
 *   dP = dOut v^T;  dS = p (dP - D);  dQ = scale dS k;  dK = scale dS^T q;  dV = p^T dOut
 * summed over the query heads that share a kv head. dQ has q's layout (qRowStride),
 * dK and dV have k's (kvRowStride), dOut has out's (outRowStride). All overwritten.
 */
export interface AttentionBackwardArgs {
  dOut: Operand;
  q: Operand;
  k: Operand;
  v: Operand;
  out: Operand;
  lse: Operand;
  dQ: Operand;
  dK: Operand;
  dV: Operand;
  batch: number;
  seqLen: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  qRowStride?: number;
  kvRowStride?: number;
  outRowStride?: number;
  scale?: number;
  dtype: FloatDType;
}

export type AttentionDims = Omit<AttentionForwardArgs, "q" | "k" | "v" | "out" | "lse">;

/** Strides and scale with defaults filled in. */
export function attentionLayout(a: AttentionDims) {
  return {
    qRowStride: a.qRowStride ?? a.heads * a.headDim,
    kvRowStride: a.kvRowStride ?? a.kvHeads * a.headDim,
    outRowStride: a.outRowStride ?? a.heads * a.headDim,
    scale: a.scale ?? 1 / Math.sqrt(a.headDim),
    group: a.heads / a.kvHeads,
  };
}

function extents(a: AttentionDims) {
  const l = attentionLayout(a);
  const rows = a.batch * a.seqLen;
  return {
    q: stridedExtent(rows, a.heads * a.headDim, l.qRowStride),
    kv: stridedExtent(rows, a.kvHeads * a.headDim, l.kvRowStride),
    out: stridedExtent(rows, a.heads * a.headDim, l.outRowStride),
    lse: a.batch * a.heads * a.seqLen,
  };
}

function checkAttention(name: string, a: AttentionDims): void {
  positiveInts(name, { batch: a.batch, seqLen: a.seqLen, heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim });
  require(name, a.heads % a.kvHeads === 0, `heads (${a.heads}) must be a multiple of kvHeads (${a.kvHeads})`);
  const l = attentionLayout(a);
  require(name, l.qRowStride >= a.heads * a.headDim, "qRowStride must be >= heads*headDim");
  require(name, l.kvRowStride >= a.kvHeads * a.headDim, "kvRowStride must be >= kvHeads*headDim");
  require(name, l.outRowStride >= a.heads * a.headDim, "outRowStride must be >= heads*headDim");
}

const attentionFlops = (a: AttentionDims) => {
  // Two (T x T x D) products per head, causal half.
  return 2 * 2 * a.batch * a.heads * a.headDim * ((a.seqLen * (a.seqLen + 1)) / 2);
};

export const attentionForwardSpec: KernelSpec<AttentionForwardArgs> = {
  name: "attentionForward",
  operands: (a) => {
    const e = extents(a);
    return [
      operand("q", "in", a.dtype, e.q, { strided: true }),
      operand("k", "in", a.dtype, e.kv, { strided: true }),
      operand("v", "in", a.dtype, e.kv, { strided: true }),
      operand("out", "out", a.dtype, e.out, { strided: true }),
      operand("lse", "out", "f32", e.lse),
    ];
  },
  check: (a) => checkAttention("attentionForward", a),
  flops: attentionFlops,
};

export const attentionBackwardSpec: KernelSpec<AttentionBackwardArgs> = {
  name: "attentionBackward",
  operands: (a) => {
    const e = extents(a);
    return [
      operand("dOut", "in", a.dtype, e.out, { strided: true }),
      operand("q", "in", a.dtype, e.q, { strided: true }),
      operand("k", "in", a.dtype, e.kv, { strided: true }),
      operand("v", "in", a.dtype, e.kv, { strided: true }),
      operand("out", "in", a.dtype, e.out, { strided: true }),
      operand("lse", "in", "f32", e.lse),
      operand("dQ", "out", a.dtype, e.q, { strided: true }),
      operand("dK", "out", a.dtype, e.kv, { strided: true }),
      operand("dV", "out", a.dtype, e.kv, { strided: true }),
    ];
  },
  check: (a) => checkAttention("attentionBackward", a),
  flops: (a) => 2.5 * attentionFlops(a),
};
