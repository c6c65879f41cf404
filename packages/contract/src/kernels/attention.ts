import type { Operand } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { type KernelSpec, operand, positiveInts, require, stridedExtent } from "./spec.js";

/**
 * Causal scaled-dot-product attention, GQA aware, with a value head size that may
 * differ from the query/key head size (Multi-head Latent Attention, where q and k
 * heads are d_nope + d_rope wide and v heads are vHeadDim wide).
 * Layouts (row-major, one row per token):
 *   q:   (batch, seqLen, heads,   headDim),  rows qRowStride apart
 *   k:   (batch, seqLen, kvHeads, headDim),  rows kvRowStride apart
 *   v:   (batch, seqLen, kvHeads, vHeadDim), rows vRowStride apart
 *   out: (batch, seqLen, heads,   vHeadDim), rows outRowStride apart
 *   lse: (batch, heads, seqLen) f32, log-sum-exp of each query's scaled scores
 * vHeadDim defaults to headDim. Default strides are dense: qRowStride = heads*headDim,
 * kvRowStride = kvHeads*headDim, outRowStride = heads*vHeadDim. vRowStride defaults to
 * kvRowStride when vHeadDim equals headDim (given or not), so a packed GPT-2 qkv buffer
 * (B, T, 3C) is still addressed as three slices at element offsets 0, C, 2C with
 * qRowStride = kvRowStride = 3C; when vHeadDim differs it defaults to the dense
 * kvHeads*vHeadDim (pass it for any packed layout of v).
 * Query head h reads kv head floor(h / (heads / kvHeads)).
 *   s[t,u] = scale * q[t]·k[u] for u <= t;  p = softmax_u(s);  out[t] = sum_u p[t,u] v[u]
 * scale defaults to 1/sqrt(headDim). Scores and sums in f32; nothing of size
 * seqLen x seqLen needs to exist beyond one tile.
 * window W (sliding-window attention, Mistral's sliding_window): query t sees only keys
 * t-W < u <= t, the last W positions including its own; undefined, or W >= seqLen, is
 * the full causal mask. Kernels skip key tiles wholly outside the window.
 * docStarts (packed rows of several documents): i32 per token (batch, seqLen), the position
 * in its row where the token's document begins; query t then sees only keys
 * max(docStarts[t], t-W+1) <= u <= t, never a key of an earlier document. Documents are
 * contiguous: docStarts[t] <= t, and docStarts[u] = docStarts[t] for docStarts[t] <= u <= t
 * (so it is non-decreasing along a row). Absent: every row is one document.
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
  /** Query and key head size. */
  headDim: number;
  /** Value (and output) head size; default headDim. */
  vHeadDim?: number;
  qRowStride?: number;
  /** Row stride of k (and of v unless vRowStride says otherwise). */
  kvRowStride?: number;
  /** Row stride of v; default kvRowStride when vHeadDim equals headDim, else kvHeads*vHeadDim. */
  vRowStride?: number;
  outRowStride?: number;
  scale?: number;
  /** Keys each query sees, its own included (sliding window); default seqLen. */
  window?: number;
  /** Packed rows: where each token's document begins in its row (i32, batch x seqLen). */
  docStarts?: Operand;
  dtype: FloatDType;
}

/**
 * Gradients of attentionForward. With D[t] = dOut[t]·out[t]:
 *   dP = dOut v^T;  dS = p (dP - D);  dQ = scale dS k;  dK = scale dS^T q;  dV = p^T dOut
 * summed over the query heads that share a kv head. dQ has q's layout (qRowStride),
 * dK has k's (kvRowStride, headDim wide), dV has v's (vRowStride, vHeadDim wide),
 * dOut has out's (outRowStride, vHeadDim wide). All overwritten. `window` as in the forward.
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
  vHeadDim?: number;
  qRowStride?: number;
  kvRowStride?: number;
  vRowStride?: number;
  outRowStride?: number;
  scale?: number;
  window?: number;
  docStarts?: Operand;
  dtype: FloatDType;
}

export type AttentionDims = Omit<AttentionForwardArgs, "q" | "k" | "v" | "out" | "lse" | "docStarts">;

/** Value head size, strides and scale with defaults filled in. */
export function attentionLayout(a: AttentionDims) {
  const vHeadDim = a.vHeadDim ?? a.headDim;
  const kvRowStride = a.kvRowStride ?? a.kvHeads * a.headDim;
  return {
    vHeadDim,
    qRowStride: a.qRowStride ?? a.heads * a.headDim,
    kvRowStride,
    vRowStride: a.vRowStride ?? (vHeadDim === a.headDim ? kvRowStride : a.kvHeads * vHeadDim),
    outRowStride: a.outRowStride ?? a.heads * vHeadDim,
    scale: a.scale ?? 1 / Math.sqrt(a.headDim),
    group: a.heads / a.kvHeads,
    /** Keys a query sees at most: min(window, seqLen). */
    window: Math.min(a.window ?? a.seqLen, a.seqLen),
  };
}

/** The first key query t sees under a window of W keys (and, in a packed row, from its document's start on). */
export const firstKey = (t: number, window: number, docStart = 0) => Math.max(0, t - window + 1, docStart);

function extents(a: AttentionDims) {
  const l = attentionLayout(a);
  const rows = a.batch * a.seqLen;
  return {
    q: stridedExtent(rows, a.heads * a.headDim, l.qRowStride),
    k: stridedExtent(rows, a.kvHeads * a.headDim, l.kvRowStride),
    v: stridedExtent(rows, a.kvHeads * l.vHeadDim, l.vRowStride),
    out: stridedExtent(rows, a.heads * l.vHeadDim, l.outRowStride),
    lse: a.batch * a.heads * a.seqLen,
  };
}

function checkAttention(name: string, a: AttentionDims): void {
  positiveInts(name, { batch: a.batch, seqLen: a.seqLen, heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim, vHeadDim: a.vHeadDim, window: a.window });
  require(name, a.heads % a.kvHeads === 0, `heads (${a.heads}) must be a multiple of kvHeads (${a.kvHeads})`);
  const l = attentionLayout(a);
  const D = a.headDim, DV = l.vHeadDim;
  const atLeast = (key: string, value: number, what: string, min: number) =>
    require(name, value >= min, `${key} (${value}) must be >= ${what} (${min})`);
  atLeast("qRowStride", l.qRowStride, "heads*headDim", a.heads * D);
  atLeast("kvRowStride", l.kvRowStride, "kvHeads*headDim", a.kvHeads * D);
  atLeast("vRowStride", l.vRowStride, "kvHeads*vHeadDim", a.kvHeads * DV);
  atLeast("outRowStride", l.outRowStride, "heads*vHeadDim", a.heads * DV);
}

/**
 * Query-key pairs the mask keeps, over all heads and batches: the first W queries see
 * 1..W keys, the other T-W see W each.
 */
export function attentionPairs(a: AttentionDims): number {
  const T = a.seqLen, W = attentionLayout(a).window;
  return a.batch * a.heads * ((W * (W + 1)) / 2 + (T - W) * W);
}

/** q·k (headDim) and p·v (vHeadDim) per kept pair. */
const attentionFlops = (a: AttentionDims) => 2 * attentionPairs(a) * (a.headDim + attentionLayout(a).vHeadDim);

/** Recomputed q·k, dQ and dK (headDim each); dP = dOut·v and dV (vHeadDim each). */
const attentionBackwardFlops = (a: AttentionDims) => 2 * attentionPairs(a) * (3 * a.headDim + 2 * attentionLayout(a).vHeadDim);

const documentStarts = (a: AttentionDims) => operand("docStarts", "in", "i32", a.batch * a.seqLen, { optional: true, init: { kind: "documentStarts", seqLen: a.seqLen } });

export const attentionForwardSpec: KernelSpec<AttentionForwardArgs> = {
  name: "attentionForward",
  operands: (a) => {
    const e = extents(a);
    return [
      operand("q", "in", a.dtype, e.q, { strided: true }),
      operand("k", "in", a.dtype, e.k, { strided: true }),
      operand("v", "in", a.dtype, e.v, { strided: true }),
      operand("out", "out", a.dtype, e.out, { strided: true }),
      operand("lse", "out", "f32", e.lse),
      documentStarts(a),
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
      operand("k", "in", a.dtype, e.k, { strided: true }),
      operand("v", "in", a.dtype, e.v, { strided: true }),
      operand("out", "in", a.dtype, e.out, { strided: true }),
      operand("lse", "in", "f32", e.lse),
      operand("dQ", "out", a.dtype, e.q, { strided: true }),
      operand("dK", "out", a.dtype, e.k, { strided: true }),
      operand("dV", "out", a.dtype, e.v, { strided: true }),
      documentStarts(a),
    ];
  },
  check: (a) => checkAttention("attentionBackward", a),
  flops: attentionBackwardFlops,
};
