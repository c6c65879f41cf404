import { type ConformanceCase, conformanceCases } from "@kiln/contract/conformance";

// Attention shapes the conformance suite does not reach, for the tensor-core kernels
// (attention-mma-sim.test.ts, attention-wgmma-sim.test.ts), checked against the f64
// reference: several key and query tiles with a short last one, both tile widths (DP 64
// and 128) forward and backward, grouped-query heads (the dK/dV blocks loop over every
// head of the group), a packed qkv buffer, a value head size apart from the query/key
// one, and layouts that rule out 16-byte copies (the plain-load path of the mma.sync
// kernels); and sliding windows shorter than the sequence, so that every path skips
// whole key tiles before the window (forward, dQ) and query tiles past it (dK/dV) and
// masks the window's edge inside tiles; and packed rows of several documents (docStarts),
// alone and under a window, on the same paths: query tiles start at their first row's
// document, key tiles stop at the first query tile past their last key's document.

export const attentionCases: ConformanceCase[] = [
  // DP 128, cp.async: 4 key tiles (the last of 8 keys), 4 query tiles, 2 query heads on one kv head.
  { kernel: "attentionForward", dtype: "bf16", shape: "long", label: "headDim 128 gqa, 4 key tiles", args: { batch: 1, seqLen: 200, heads: 2, kvHeads: 1, headDim: 128 } },
  // DP 64 (warps of two 16-row tiles, blocks of 128 rows), cp.async: 3 query tiles, the last of 44 rows (a warp with rows past the sequence, one with none), 5 key tiles.
  { kernel: "attentionForward", dtype: "bf16", shape: "long", label: "headDim 64, 3 query tiles of 128, gqa 2:1", args: { batch: 1, seqLen: 300, heads: 2, kvHeads: 1, headDim: 64 } },
  // DP 64, cp.async: a last key tile of one key, scale.
  { kernel: "attentionForward", dtype: "f16", shape: "long", label: "headDim 64, last tile of 1 key, scale 0.2", args: { batch: 2, seqLen: 129, heads: 4, kvHeads: 2, headDim: 64, scale: 0.2 } },
  // q, k and v as slices of one buffer, rows 16-byte aligned.
  {
    kernel: "attentionForward",
    dtype: "bf16",
    shape: "strided",
    label: "one packed qkv buffer, headDim 32",
    args: { batch: 2, seqLen: 100, heads: 2, kvHeads: 2, headDim: 32, qRowStride: 192, kvRowStride: 192, outRowStride: 72 },
    shared: [{ q: 0, k: 64, v: 128 }],
  },
  // vHeadDim > headDim: V and O tiles follow the wider size.
  { kernel: "attentionForward", dtype: "f16", shape: "odd", label: "headDim 64 vHeadDim 128", args: { batch: 1, seqLen: 70, heads: 3, kvHeads: 1, headDim: 64, vHeadDim: 128 } },
  // Rows not 16-byte aligned, head size not a multiple of 8: plain loads.
  { kernel: "attentionForward", dtype: "bf16", shape: "strided", label: "qRowStride 44 (plain loads)", args: { batch: 1, seqLen: 150, heads: 1, kvHeads: 1, headDim: 40, qRowStride: 44 } },
  { kernel: "attentionForward", dtype: "f16", shape: "odd", label: "headDim 100 (plain loads)", args: { batch: 1, seqLen: 90, heads: 2, kvHeads: 2, headDim: 100 } },
  // Sliding windows: the last 128-row query tile starts at key 187 (two 64-key tiles, one of 128, skipped), gqa 2:1.
  { kernel: "attentionForward", dtype: "bf16", shape: "long", label: "headDim 64 gqa 2:1, window 70", args: { batch: 1, seqLen: 300, heads: 2, kvHeads: 1, headDim: 64, window: 70 } },
  // DP 128: query tiles of 64 from row 128 skip key tile 0 and more; the window's edge inside a tile.
  { kernel: "attentionForward", dtype: "f16", shape: "long", label: "headDim 128, window 40", args: { batch: 2, seqLen: 200, heads: 2, kvHeads: 2, headDim: 128, window: 40 } },
  // A window of 5 keys (most rows of a tile see none of its first keys), vHeadDim > headDim.
  { kernel: "attentionForward", dtype: "f16", shape: "odd", label: "headDim 64 vHeadDim 128, window 5", args: { batch: 1, seqLen: 170, heads: 2, kvHeads: 1, headDim: 64, vHeadDim: 128, window: 5 } },
  { kernel: "attentionForward", dtype: "bf16", shape: "strided", label: "qRowStride 44 (plain loads), window 17", args: { batch: 1, seqLen: 150, heads: 1, kvHeads: 1, headDim: 40, qRowStride: 44, window: 17 } },
  // Documents: 3 query tiles of 128 rows, gqa 2:1; DP 128 under a window too; plain loads.
  { kernel: "attentionForward", dtype: "bf16", shape: "long", label: "headDim 64 gqa 2:1, documents", args: { batch: 2, seqLen: 300, heads: 2, kvHeads: 1, headDim: 64 }, present: ["docStarts"] },
  { kernel: "attentionForward", dtype: "f16", shape: "long", label: "headDim 128, documents, window 40", args: { batch: 2, seqLen: 200, heads: 2, kvHeads: 2, headDim: 128, window: 40 }, present: ["docStarts"] },
  { kernel: "attentionForward", dtype: "f16", shape: "strided", label: "qRowStride 44 (plain loads), documents", args: { batch: 1, seqLen: 150, heads: 1, kvHeads: 1, headDim: 40, qRowStride: 44 }, present: ["docStarts"] },
];

// The backward's saved statistics (out, lse) come from the reference forward, as in the conformance suite.
const derive = conformanceCases().find((c) => c.kernel === "attentionBackward")!.derive;
const backward = (c: Omit<ConformanceCase, "kernel">): ConformanceCase => ({ ...c, kernel: "attentionBackward", derive });
attentionCases.push(
  // 4 query and key tiles, the last of 8 rows; a group of 3 query heads per kv head.
  backward({ dtype: "bf16", shape: "long", label: "headDim 64 gqa 3:1, 4 tiles", args: { batch: 1, seqLen: 200, heads: 3, kvHeads: 1, headDim: 64 } }),
  // Two batch items, a last tile of one row, scale; headDim 32 (zero padded to 64).
  backward({ dtype: "f16", shape: "long", label: "headDim 32, last tile of 1 row, scale 0.3", args: { batch: 2, seqLen: 129, heads: 2, kvHeads: 2, headDim: 32, scale: 0.3 } }),
  // One packed q|k|v buffer and one packed dQ|dK|dV buffer, rows 16-byte aligned.
  backward({
    dtype: "bf16",
    shape: "strided",
    label: "packed qkv and dQ|dK|dV, headDim 16",
    args: { batch: 2, seqLen: 90, heads: 2, kvHeads: 2, headDim: 16, qRowStride: 96, kvRowStride: 96, outRowStride: 40 },
    shared: [{ q: 0, k: 32, v: 64 }, { dQ: 0, dK: 32, dV: 64 }],
  }),
  // vHeadDim != headDim, and rows that rule out 16-byte copies.
  backward({ dtype: "f16", shape: "odd", label: "headDim 40 vHeadDim 56", args: { batch: 1, seqLen: 100, heads: 2, kvHeads: 1, headDim: 40, vHeadDim: 56 } }),
  backward({ dtype: "bf16", shape: "strided", label: "headDim 20 (plain loads)", args: { batch: 1, seqLen: 140, heads: 2, kvHeads: 2, headDim: 20 } }),
  // DP 128 (loop tiles of 32, the block's rows read from shared memory): 5 query and key tiles, gqa 2:1.
  backward({ dtype: "f16", shape: "long", label: "headDim 128 gqa 2:1, tiles of 32", args: { batch: 1, seqLen: 150, heads: 2, kvHeads: 1, headDim: 128 } }),
  // Multi-head latent attention's sizes: query/key heads of 96 (64 + a RoPE slice of 32), value heads of 64.
  backward({ dtype: "bf16", shape: "odd", label: "headDim 96 vHeadDim 64", args: { batch: 2, seqLen: 70, heads: 2, kvHeads: 2, headDim: 96, vHeadDim: 64, scale: 0.125 } }),
  backward({ dtype: "f16", shape: "odd", label: "headDim 100 (plain loads, DP 128)", args: { batch: 1, seqLen: 45, heads: 1, kvHeads: 1, headDim: 100 } }),
  // Sliding windows: key tiles visit only the query tiles that see them, query tiles only the key tiles they see
  // (the stored dS keeps the window's band of tiles: two below the diagonal at window 70).
  backward({ dtype: "bf16", shape: "long", label: "headDim 64 gqa 3:1, window 70", args: { batch: 1, seqLen: 300, heads: 3, kvHeads: 1, headDim: 64, window: 70 } }),
  backward({ dtype: "f16", shape: "long", label: "headDim 32, window 64, two batch items", args: { batch: 2, seqLen: 257, heads: 2, kvHeads: 2, headDim: 32, window: 64 } }),
  backward({ dtype: "f16", shape: "long", label: "headDim 128 gqa 2:1, tiles of 32, window 50", args: { batch: 1, seqLen: 200, heads: 2, kvHeads: 1, headDim: 128, window: 50 } }),
  backward({ dtype: "bf16", shape: "odd", label: "headDim 96 vHeadDim 64, window 30", args: { batch: 1, seqLen: 150, heads: 2, kvHeads: 2, headDim: 96, vHeadDim: 64, window: 30 } }),
  backward({ dtype: "bf16", shape: "strided", label: "headDim 20 (plain loads), window 33", args: { batch: 1, seqLen: 160, heads: 2, kvHeads: 2, headDim: 20, window: 33 } }),
  // Documents (the stored dS: only the tiles from a query tile's first document on).
  backward({ dtype: "bf16", shape: "long", label: "headDim 64 gqa 3:1, documents", args: { batch: 2, seqLen: 300, heads: 3, kvHeads: 1, headDim: 64 }, present: ["docStarts"] }),
  backward({ dtype: "f16", shape: "long", label: "headDim 32, documents, window 64", args: { batch: 2, seqLen: 257, heads: 2, kvHeads: 2, headDim: 32, window: 64 }, present: ["docStarts"] }),
  backward({ dtype: "f16", shape: "long", label: "headDim 128 gqa 2:1, tiles of 32, documents", args: { batch: 2, seqLen: 200, heads: 2, kvHeads: 1, headDim: 128 }, present: ["docStarts"] }),
  backward({ dtype: "bf16", shape: "odd", label: "headDim 96 vHeadDim 64, documents, window 30", args: { batch: 1, seqLen: 150, heads: 2, kvHeads: 2, headDim: 96, vHeadDim: 64, window: 30 }, present: ["docStarts"] }),
  backward({ dtype: "bf16", shape: "strided", label: "headDim 20 (plain loads), documents", args: { batch: 1, seqLen: 160, heads: 2, kvHeads: 2, headDim: 20 }, present: ["docStarts"] }),
);

