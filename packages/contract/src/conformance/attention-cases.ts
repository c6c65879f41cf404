import { type Def, d } from "./case-def.js";

// The attention kernels' cases: shapes, value head sizes apart from the query/key one,
// packed buffers, peaked scores and sliding windows (forward and backward alike; the
// backward's saved statistics are derived in cases.ts).

const attentionShapes: Def[] = [
  d("one", { batch: 1, seqLen: 1, heads: 1, kvHeads: 1, headDim: 1 }),
  d("prime", { batch: 1, seqLen: 7, heads: 2, kvHeads: 2, headDim: 5 }),
  d("odd", { batch: 2, seqLen: 13, heads: 4, kvHeads: 2, headDim: 6 }, { label: "gqa" }),
  d("options", { batch: 1, seqLen: 17, heads: 3, kvHeads: 1, headDim: 8, scale: 0.3 }, { label: "mqa scale=0.3" }),
  d("strided", { batch: 2, seqLen: 9, heads: 2, kvHeads: 2, headDim: 4, qRowStride: 24, kvRowStride: 24, outRowStride: 11 }, { label: "packed qkv" }),
  d("long", { batch: 1, seqLen: 130, heads: 1, kvHeads: 1, headDim: 16 }),
  d("large", { batch: 2, seqLen: 64, heads: 4, kvHeads: 4, headDim: 32 }),
];

/**
 * Scores spread over tens of units (scale 4, head size 64: a standard deviation of about
 * 11): along a row of 130 keys the max climbs between key tiles by more than a factor of
 * 2^8 as well as by less, so kernels that move their softmax's reference max only on
 * large climbs take both ways. A negative scale: unmasked tiles whose scores must be
 * scaled before their max is taken.
 */
const peakedAttentionShapes: Def[] = [
  d("options", { batch: 1, seqLen: 130, heads: 2, kvHeads: 1, headDim: 64, scale: 4 }, { label: "scale=4: peaked rows, maxima that climb" }),
  d("options", { batch: 2, seqLen: 40, heads: 2, kvHeads: 2, headDim: 16, scale: -3 }, { label: "scale=-3" }),
];

/**
 * A value head size apart from the query/key one (Multi-head Latent Attention): smaller
 * and larger than headDim, sizes off every SIMD width and tile, head sizes in different
 * tile buckets, GQA, row strides of their own for k and v, seqLen off the tile sizes.
 */
const vHeadShapes: Def[] = [
  d("prime", { batch: 1, seqLen: 7, heads: 3, kvHeads: 1, headDim: 5, vHeadDim: 3, scale: 0.4 }, { label: "vHeadDim < headDim, mqa" }),
  d("odd", { batch: 2, seqLen: 13, heads: 2, kvHeads: 2, headDim: 24, vHeadDim: 16 }, { label: "vHeadDim < headDim" }),
  d("odd", { batch: 2, seqLen: 37, heads: 4, kvHeads: 2, headDim: 40, vHeadDim: 56 }, { label: "vHeadDim > headDim, gqa" }),
  d("strided", { batch: 2, seqLen: 19, heads: 4, kvHeads: 2, headDim: 12, vHeadDim: 20, qRowStride: 50, kvRowStride: 27, vRowStride: 45, outRowStride: 83 }, { label: "k and v rows apart" }),
  d("long", { batch: 2, seqLen: 77, heads: 2, kvHeads: 1, headDim: 72, vHeadDim: 40 }, { label: "headDim and vHeadDim in different tile buckets" }),
  d("large", { batch: 1, seqLen: 130, heads: 2, kvHeads: 2, headDim: 48, vHeadDim: 136 }, { label: "vHeadDim > 128" }),
];

/** k and v (and dK, dV) as two slices of one (B*T, kvHeads*(headDim + vHeadDim)) buffer. */
const packedKv = (backward: boolean): Def =>
  d("strided", { batch: 2, seqLen: 11, heads: 4, kvHeads: 2, headDim: 6, vHeadDim: 10, kvRowStride: 32, vRowStride: 32 }, {
    label: "one packed kv buffer, vHeadDim > headDim",
    shared: backward ? [{ k: 0, v: 12 }, { dK: 0, dV: 12 }] : [{ k: 0, v: 12 }],
  });

/** GPT-2's layout: q, k, v (and dQ, dK, dV) as three slices of one (B*T, 3C) buffer. */
const packedQkv = (backward: boolean): Def =>
  d("strided", { batch: 2, seqLen: 11, heads: 3, kvHeads: 3, headDim: 4, qRowStride: 36, kvRowStride: 36 }, {
    label: "one packed qkv buffer",
    shared: backward ? [{ q: 0, k: 12, v: 24 }, { dQ: 0, dK: 12, dV: 24 }] : [{ q: 0, k: 12, v: 24 }],
  });

/**
 * Sliding windows: a window of one key; windows smaller than, equal to and larger than
 * the sequence; edges inside a key tile and on tile boundaries (64, 128); sequences with
 * whole key tiles before the window to skip; a value head of its own; peaked scores.
 */
const windowShapes: Def[] = [
  d("one", { batch: 1, seqLen: 5, heads: 1, kvHeads: 1, headDim: 3, window: 1 }, { label: "sliding window" }),
  d("odd", { batch: 2, seqLen: 13, heads: 4, kvHeads: 2, headDim: 6, window: 4 }, { label: "sliding window, gqa" }),
  d("options", { batch: 1, seqLen: 20, heads: 2, kvHeads: 2, headDim: 8, window: 20 }, { label: "window = seqLen" }),
  d("options", { batch: 1, seqLen: 9, heads: 2, kvHeads: 1, headDim: 8, window: 50 }, { label: "window > seqLen" }),
  d("long", { batch: 2, seqLen: 77, heads: 2, kvHeads: 1, headDim: 40, vHeadDim: 56, window: 33 }, { label: "sliding window, vHeadDim > headDim" }),
  d("long", { batch: 1, seqLen: 300, heads: 2, kvHeads: 1, headDim: 64, window: 100 }, { label: "sliding window" }),
  d("long", { batch: 1, seqLen: 200, heads: 1, kvHeads: 1, headDim: 32, window: 64 }, { label: "sliding window" }),
  d("long", { batch: 1, seqLen: 260, heads: 2, kvHeads: 2, headDim: 16, window: 65 }, { label: "sliding window" }),
  d("options", { batch: 1, seqLen: 150, heads: 2, kvHeads: 1, headDim: 64, scale: 4, window: 63 }, { label: "sliding window, scale=4" }),
  d("large", { batch: 1, seqLen: 512, heads: 2, kvHeads: 1, headDim: 64, window: 128 }, { label: "sliding window" }),
];

/** GPT-2's packed qkv with a window of 3. */
const packedQkvWindow = (backward: boolean): Def => {
  const s = packedQkv(backward);
  return { ...s, args: { ...s.args, window: 3 }, label: "one packed qkv buffer, sliding window" };
};

/**
 * Packed rows (docStarts): documents of one token up to half a row, rows left whole; edges
 * inside and across key tiles (64, 128), with a sliding window too, GQA, a value head of
 * its own, GPT-2's packed qkv, peaked scores.
 */
const documentShapes = (backward: boolean): Def[] => {
  const docs = (def: Def, label: string): Def => ({ ...def, present: ["docStarts"], label });
  return [
    docs(d("one", { batch: 1, seqLen: 1, heads: 1, kvHeads: 1, headDim: 3 }), "documents"),
    docs(d("prime", { batch: 3, seqLen: 7, heads: 2, kvHeads: 2, headDim: 5 }), "documents"),
    docs(d("odd", { batch: 2, seqLen: 13, heads: 4, kvHeads: 2, headDim: 6 }), "documents, gqa"),
    docs(d("odd", { batch: 2, seqLen: 37, heads: 4, kvHeads: 2, headDim: 40, vHeadDim: 56 }), "documents, vHeadDim > headDim"),
    docs(d("long", { batch: 2, seqLen: 130, heads: 2, kvHeads: 1, headDim: 16 }), "documents across key tiles"),
    docs(d("long", { batch: 1, seqLen: 300, heads: 2, kvHeads: 1, headDim: 64, window: 100 }), "documents, sliding window"),
    docs(d("large", { batch: 2, seqLen: 256, heads: 2, kvHeads: 2, headDim: 64 }), "documents"),
    docs(packedQkv(backward), "documents, one packed qkv buffer"),
    ...(backward ? [] : [docs(d("options", { batch: 1, seqLen: 130, heads: 2, kvHeads: 1, headDim: 64, scale: 4 }), "documents, scale=4")]),
  ];
};

/** Every attention case, in order; `backward` shares dQ, dK, dV in the packed ones too. */
export function attentionCases(backward: boolean): Def[] {
  return [
    ...attentionShapes,
    packedQkv(backward),
    ...vHeadShapes,
    packedKv(backward),
    ...(backward ? [] : peakedAttentionShapes),
    ...windowShapes,
    packedQkvWindow(backward),
    ...documentShapes(backward),
  ];
}
