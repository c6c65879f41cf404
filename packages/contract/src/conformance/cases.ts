import { FLOAT_DTYPES, type DType, type FloatDType } from "../dtype.js";
import { KERNEL_NAMES, type KernelName } from "../kernels/index.js";
import { oracle } from "../oracle/index.js";
import { attentionCases } from "./attention-cases.js";
import type { ConformanceCase, ShapeClass } from "./case.js";
import { type Def, type Defs, d } from "./case-def.js";


const dimsLabel = (args: Record<string, unknown>) =>
  Object.entries(args)
    .filter(([k]) => k !== "dtype")
    .map(([k, v]) => (v === true ? k : `${k}=${typeof v === "number" && !Number.isInteger(v) ? +v.toFixed(4) : typeof v === "object" ? JSON.stringify(v) : v}`))
    .join(" ");


const unarySizes = (name: string): Def[] => [
  d("one", { n: 1 }),
  d("prime", { n: 37 }),
  d("odd", { n: 1023 }),
  d("long", { n: 4099 }),
  d("large", { n: 100_003 }),
  d("in-place", { n: 257 }, { inPlace: name.endsWith("Forward") ? ["out", "x"] : ["dX", "dOut"] }),
];

/** The gated unit with SiLU (SwiGLU) and with the tanh GELU (GeGLU) at every size. */
const gatedSizes = (name: string): Def[] => {
  const sizes = unarySizes(name).filter((s) => s.shape !== "in-place");
  return [...sizes, ...sizes.map((s) => ({ ...s, args: { ...s.args, activation: "gelu" }, label: "GeGLU" }))];
};

const normShapes: Def[] = [
  d("one", { rows: 1, dim: 1 }),
  d("prime", { rows: 7, dim: 13 }),
  d("odd", { rows: 33, dim: 65 }),
  d("long", { rows: 3, dim: 4099 }),
  d("large", { rows: 256, dim: 384 }),
  // Rows of whole 16-byte vectors (33 of bf16, 66 of f32), 37 rows: kernels that move rows by vectors.
  d("large", { rows: 37, dim: 264 }, { label: "whole 16-byte rows" }),
];

/**
 * Unary backward cases that also sum dX's columns (a bias gradient): rows of odd width,
 * rows of whole 16-byte vectors over several chunks of partial sums, and dX over dOut.
 */
const columnSumShapes: Def[] = [
  d("options", { n: 33 * 65, cols: 65 }, { present: ["dXColSums"], label: "dX's column sums" }),
  d("large", { n: 300 * 264, cols: 264 }, { present: ["dXColSums"], label: "whole 16-byte rows, dX's column sums" }),
  d("in-place", { n: 37 * 264, cols: 264 }, { present: ["dXColSums"], inPlace: ["dX", "dOut"], label: "dX's column sums" }),
];

/**
 * Norm forward cases that normalize x + residual and write the sum: rows of one block,
 * rows past a block's registers, and rows of whole 16-byte vectors with the sum written
 * over residual or x.
 */
const residualForwardShapes: Def[] = [
  d("options", { rows: 9, dim: 17 }, { present: ["residual", "sum"], label: "plus residual" }),
  d("long", { rows: 2, dim: 8200 }, { present: ["residual", "sum"], label: "plus residual" }),
  d("in-place", { rows: 37, dim: 264 }, { present: ["residual", "sum"], inPlace: ["sum", "residual"], label: "whole 16-byte rows, sum over residual" }),
  d("in-place", { rows: 9, dim: 31 }, { present: ["residual", "sum"], inPlace: ["sum", "x"], label: "plus residual, sum over x" }),
];

/**
 * Norm backward cases that add the residual stream's gradient into dX and sum dX's
 * columns: rows of one block, rows longer than a block's registers, and rows of whole
 * 16-byte vectors (in place, and enough of them for several chunks of partial sums).
 */
const residualGradientShapes: Def[] = [
  d("options", { rows: 9, dim: 17 }, { present: ["dResidual"], label: "plus dResidual" }),
  d("options", { rows: 33, dim: 65 }, { present: ["dResidual", "dXColSums"], label: "plus dResidual, dX's column sums" }),
  d("long", { rows: 3, dim: 4099 }, { present: ["dResidual", "dXColSums"], label: "plus dResidual, dX's column sums" }),
  d("in-place", { rows: 37, dim: 264 }, { present: ["dResidual", "dXColSums"], inPlace: ["dX", "dResidual"], label: "whole 16-byte rows, into dResidual, dX's column sums" }),
  d("large", { rows: 300, dim: 264 }, { present: ["dXColSums"], label: "whole 16-byte rows, dX's column sums over chunks" }),
  d("large", { rows: 20, dim: 1000 }, { present: ["dXColSums"], label: "whole 16-byte rows of 1000, dX's column sums" }),
];

/**
 * Gemma's RMSNorm, weight + 1: rows of one block and past a block's registers, whole
 * 16-byte rows, a norm over each head (dim 12), and one with a residual.
 */
const weightOffsetShapes: Def[] = [
  d("options", { rows: 33, dim: 65, weightOffset: 1 }, { label: "1 + weight" }),
  d("options", { rows: 40, dim: 12, weightOffset: 1 }, { label: "1 + weight, per-head rows" }),
  d("long", { rows: 3, dim: 4099, weightOffset: 1 }, { label: "1 + weight" }),
  d("large", { rows: 37, dim: 264, weightOffset: -0.5 }, { label: "weight - 0.5, whole 16-byte rows" }),
];

/** Saved statistics for a backward case, computed by the oracle's forward from the case's inputs. */
function deriveFrom(forward: KernelName, outputs: Record<string, string>, extraInputs: Record<string, string> = {}) {
  return (args: Record<string, unknown>, v: Record<string, Float64Array>) => {
    const fv: Record<string, Float64Array> = { ...v };
    for (const [fwdKey, bwdKey] of Object.entries(extraInputs)) fv[fwdKey] = v[bwdKey];
    for (const [fwdKey, bwdKey] of Object.entries(outputs)) fv[fwdKey] = v[bwdKey] ?? new Float64Array(0);
    fv.out ??= new Float64Array(v.x?.length ?? 0);
    (oracle[forward] as (a: unknown, v: Record<string, Float64Array>) => void)(args, fv);
  };
}

/** rope_scaling of Llama 3.1-3.2 (factor 32 for 3.2, 8 for 3.1; the bands are the same). */
const LLAMA3_SCALING = { type: "llama3", factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 };

const ropeShapes: Def[] = [
  d("one", { batch: 1, seqLen: 1, heads: 1, headDim: 2, theta: 10000 }),
  d("prime", { batch: 2, seqLen: 7, heads: 3, headDim: 6, theta: 10000 }),
  d("strided", { batch: 1, seqLen: 13, heads: 5, headDim: 10, rowStride: 150, posOffset: 5, theta: 500000 }, { label: "packed posOffset" }),
  d("large", { batch: 4, seqLen: 64, heads: 6, headDim: 64, theta: 10000 }),
  d("in-place", { batch: 2, seqLen: 9, heads: 2, headDim: 8, theta: 10000 }, { inPlace: ["out", "x"] }),
  // Llama 3.x's scaling at its own sizes (all three bands of frequencies), then a small head whose bands are one or two pairs.
  d("options", { batch: 1, seqLen: 33, heads: 2, headDim: 64, posOffset: 9000, theta: 500000, scaling: LLAMA3_SCALING }, { label: "llama3 scaling" }),
  d("options", { batch: 2, seqLen: 7, heads: 3, headDim: 10, theta: 10000, scaling: { ...LLAMA3_SCALING, originalMaxPositions: 64 } }, { label: "llama3 scaling, small head" }),
  d("options", { batch: 1, seqLen: 13, heads: 2, headDim: 6, posOffset: 40, theta: 10000, scaling: { type: "linear", factor: 4 } }, { label: "linear scaling" }),
  // Packed rows: positions count from each token's document start.
  d("prime", { batch: 3, seqLen: 7, heads: 3, headDim: 6, theta: 10000 }, { present: ["docStarts"], label: "documents" }),
  d("strided", { batch: 2, seqLen: 40, heads: 2, headDim: 10, rowStride: 60, posOffset: 3, theta: 500000, scaling: LLAMA3_SCALING }, { present: ["docStarts"], label: "documents, packed, llama3 scaling" }),
  d("in-place", { batch: 2, seqLen: 9, heads: 2, headDim: 8, theta: 10000 }, { inPlace: ["out", "x"], present: ["docStarts"], label: "documents" }),
];

const ceShapes = (backward: boolean): Def[] => {
  const s = (rows: number, vocab: number) => (backward ? { rows, vocab, lossScale: 1 / rows } : { rows, vocab });
  const derive = backward ? deriveFrom("crossEntropyForward", { lse: "lse", losses: "losses" }) : undefined;
  return [
    d("one", s(1, 1), { derive }),
    d("prime", s(7, 13), { derive }),
    d("odd", s(33, 65), { derive }),
    d("long", s(5, 4099), { derive }),
    d("large", s(64, 2048), { derive }),
    ...(backward ? [d("in-place", s(9, 31), { derive, inPlace: ["dLogits", "logits"] as const })] : forwardWithGradientShapes),
  ];
};

/**
 * crossEntropyForward cases that also write dLogits: rows that are not 16-byte aligned,
 * aligned rows (kernels that keep a row on chip between the two passes), GPT-2's padded
 * vocabulary, rows too long for one block's shared memory, and dLogits over logits.
 */
const forwardWithGradientShapes: Def[] = [
  d("options", { rows: 7, vocab: 13, lossScale: 1 / 7 }, { present: ["dLogits"], label: "plus dLogits" }),
  d("options", { rows: 37, vocab: 264, lossScale: 0.25 }, { present: ["dLogits"], label: "whole 16-byte rows, plus dLogits" }),
  d("long", { rows: 3, vocab: 50304, lossScale: 1 / 3 }, { present: ["dLogits"], label: "GPT-2's padded vocabulary, plus dLogits" }),
  d("long", { rows: 2, vocab: 70000, lossScale: 0.5 }, { present: ["dLogits"], label: "rows past a block's shared memory, plus dLogits" }),
  d("in-place", { rows: 9, vocab: 31, lossScale: 1 / 9 }, { present: ["dLogits"], inPlace: ["dLogits", "logits"], label: "plus dLogits over logits" }),
  d("in-place", { rows: 37, vocab: 264, lossScale: 1 }, { present: ["dLogits"], inPlace: ["dLogits", "logits"], label: "whole 16-byte rows, plus dLogits over logits" }),
];

/** Consistent routing for moeRouteBackward: the forward's outputs for logits drawn like the probs operand. */
const deriveRouting = (args: Record<string, unknown>, v: Record<string, Float64Array>) => {
  const a = args as { tokens: number; numExperts: number; topK: number };
  const scratch = { slots: new Float64Array(a.tokens * a.topK), auxLoss: new Float64Array(1) };
  const logits = v.probs.map((x) => 4 * x);
  oracle.moeRoute(args as never, { ...v, ...scratch, logits });
};

const routeShapes = (backward: boolean): Def[] => {
  const s = (tokens: number, numExperts: number, topK: number, alpha: number) => (backward ? { tokens, numExperts, topK, alpha, auxScale: 0.5 } : { tokens, numExperts, topK, alpha });
  const derive = backward ? deriveRouting : undefined;
  // Logits on a coarse grid: many ties, which every backend must break by the lower expert index.
  const ties = (_a: Record<string, unknown>, v: Record<string, Float64Array>) => {
    const key = backward ? "probs" : "logits";
    for (let i = 0; i < v[key].length; i++) v[key][i] = Math.round(v[key][i] * 2) / 2;
    derive?.(_a, v);
  };
  return [
    d("one", s(1, 1, 1, 0.01), { derive }),
    d("prime", s(7, 5, 2, 0.01), { derive }),
    d("odd", s(33, 8, 3, 0.1), { derive }),
    d("options", s(9, 4, 4, 0), { derive, label: "every expert chosen, alpha 0" }),
    d("special", s(17, 6, 2, 0.01), { derive: ties, label: "tied logits" }),
    d("large", s(512, 16, 4, 0.01), { derive }),
  ];
};

const moveShapes = (withScale: boolean, accumulate = false): Def[] => [
  d("one", { tokens: 1, topK: 1, dim: 1 }),
  d("prime", { tokens: 7, topK: 2, dim: 13 }, { present: withScale ? ["scale"] : [] }),
  d("odd", { tokens: 33, topK: 3, dim: 65, ...(accumulate ? { accumulate: true } : {}) }, { present: withScale ? ["scale"] : [] }),
  d("options", { tokens: 9, topK: 4, dim: 5 }, { label: "no scale" }),
  d("large", { tokens: 256, topK: 2, dim: 384 }, { present: withScale ? ["scale"] : [] }),
];

const groupedShapes = (weightGrad: boolean): Def[] => [
  d("one", { rows: 1, n: 1, k: 1, groups: 1 }),
  d("prime", { rows: 7, n: 13, k: 11, groups: 3, ...(weightGrad ? {} : { transB: true }) }),
  d("odd", { rows: 33, n: 17, k: 65, groups: 5 }),
  ...(weightGrad ? [] : [d("options", { rows: 29, n: 19, k: 23, groups: 4, transB: true, accumulate: true })]),
  d("batch", { rows: 12, n: 6, k: 7, groups: 9 }, { label: "more groups than some rows" }),
  d("long", { rows: 3, n: 5, k: 4099, groups: 2 }),
  d("large", { rows: 256, n: 96, k: 128, groups: 8, ...(weightGrad ? {} : { transB: true }) }),
];

/** copyStrided dims: (batch, rows, cols) with src and dst [batchStride, rowStride]. */
const cp = (batch: number, rows: number, cols: number, src: [number, number], dst: [number, number], accumulate = false) => ({
  batch,
  rows,
  cols,
  srcBatchStride: src[0],
  srcRowStride: src[1],
  dstBatchStride: dst[0],
  dstRowStride: dst[1],
  ...(accumulate ? { accumulate } : {}),
});

/**
 * conv1dCausal shapes: K = 1, 2, 4 (Mamba2), 7, 16 (the largest); seqLen below K (every
 * output sees the left padding); odd channel counts off the SIMD width; x as a slice of a
 * wider projection (rowStride > channels) at an odd element offset; batch 1 and 3.
 */
const conv1dShapes = (backward: boolean): Def[] => {
  const withBias = { present: [backward ? "dBias" : "bias"] };
  const s = (batch: number, seqLen: number, channels: number, kernelSize: number, rowStride?: number) => ({
    batch,
    seqLen,
    channels,
    kernelSize,
    ...(rowStride === undefined ? {} : { rowStride }),
  });
  return [
    d("one", s(1, 1, 1, 1), withBias),
    d("one", s(1, 1, 1, 4), { label: "seqLen < K, no bias" }),
    d("prime", s(1, 7, 13, 4), withBias),
    d("odd", s(3, 5, 33, 7), { ...withBias, label: "seqLen < K" }),
    d("options", s(2, 9, 17, 2), { label: "no bias" }),
    d("options", s(2, 20, 11, 16), { ...withBias, label: "largest K" }),
    d("batch", s(3, 11, 19, 4), withBias),
    d("strided", s(3, 9, 37, 4, 100), { ...withBias, shared: [{ x: 41 }], label: "x a slice of a wider projection, odd offset" }),
    d("strided", s(1, 13, 5, 7, 12), { shared: [{ x: 3 }], label: "narrow slice, no bias" }),
    d("strided", s(2, 16, 64, 4, 128), { ...withBias, label: "aligned slice, whole vectors" }),
    d("long", s(1, 1000, 37, 4), withBias),
    d("long", s(3, 333, 9, 2), { label: "no bias" }),
    d("large", s(2, 64, 1001, 4), withBias),
    d("large", s(1, 300, 129, 8), withBias),
  ];
};

/** The dimensions of a state space scan case (ssdScan's and mamba3Scan's), strides optional. */
const scanDims = (batch: number, seqLen: number, heads: number, headDim: number, groups: number, stateSize: number, chunkSize: number, strides = {}) => ({
  batch,
  seqLen,
  heads,
  headDim,
  groups,
  stateSize,
  chunkSize,
  ...strides,
});

/**
 * ssdScan shapes: chunkSize off seqLen (a short last chunk), 1 (every token its own chunk)
 * and past seqLen (one chunk); several heads per group and a group per head; headDim and
 * stateSize off every SIMD width; x, B and C as slices of one conv output and dt a slice
 * of a wider projection at odd offsets (their gradients likewise), as Mamba2 lays them out.
 */
const ssdShapes = (backward: boolean): Def[] => {
  const s = scanDims;
  // One xBC row: x (heads·headDim), then B and C (groups·stateSize each).
  const packed = (heads: number, headDim: number, groups: number, stateSize: number, dtOffset: number) => {
    const xw = heads * headDim, bw = groups * stateSize;
    const ins: Record<string, number>[] = [{ x: 0, B: xw, C: xw + bw }, { dt: dtOffset }];
    return backward ? [...ins, { dX: 0, dB: xw, dC: xw + bw }, { dDt: dtOffset }] : ins;
  };
  const derive = backward
    ? (args: Record<string, unknown>, v: Record<string, Float64Array>) => {
        const a = args as { batch: number; seqLen: number; heads: number; headDim: number };
        oracle.ssdScanForward(args as never, { ...v, y: new Float64Array(a.batch * a.seqLen * a.heads * a.headDim) });
      }
    : undefined;
  return [
    d("one", s(1, 1, 1, 1, 1, 1, 1)),
    d("prime", s(1, 7, 2, 5, 1, 3, 4), { label: "short last chunk" }),
    d("odd", s(2, 13, 4, 6, 2, 5, 5), { label: "2 heads per group" }),
    d("options", s(1, 6, 2, 3, 1, 4, 1), { label: "chunk 1" }),
    d("options", s(1, 9, 3, 4, 3, 7, 16), { label: "one chunk, a group per head" }),
    d("batch", s(3, 10, 2, 8, 1, 8, 4)),
    d("strided", s(2, 11, 2, 4, 1, 5, 4, { xRowStride: 18, bcRowStride: 18, dtRowStride: 29 }), { shared: packed(2, 4, 1, 5, 3), label: "Mamba2 layout, odd offsets" }),
    d("strided", s(1, 17, 4, 3, 2, 6, 8, { xRowStride: 36, bcRowStride: 36, dtRowStride: 7 }), { shared: packed(4, 3, 2, 6, 2), label: "Mamba2 layout, 2 groups" }),
    d("long", s(1, 300, 2, 8, 1, 16, 64), { label: "short last chunk" }),
    d("large", s(2, 128, 4, 32, 1, 32, 64)),
    d("large", s(1, 256, 2, 64, 1, 64, 64), { label: "Mamba2 head and state" }),
  ].map((c) => ({ ...c, derive }));
};

/**
 * mamba3Scan shapes: as ssdScan's (short last chunk, chunk 1, one chunk, several heads per
 * group, sizes off every SIMD width), with and without the rotation (theta), x, B and C as
 * slices of one conv output or B and C of one projection; λ pushed near 0 and 1 and Δ past
 * softplus' threshold (20) on some tokens.
 */
const mamba3Shapes = (backward: boolean): Def[] => {
  const s = scanDims;
  const rope = { present: backward ? ["theta", "dTheta"] : ["theta"] };
  const both = (ins: Record<string, number>[]) =>
    backward ? [...ins, ...ins.map((m) => Object.fromEntries(Object.entries(m).map(([k, v]) => [`d${k[0].toUpperCase()}${k.slice(1)}`, v])))] : ins;
  // With the conv: one xBC row [x | B | C]; without: one [B | C] row.
  const packedXbc = (xw: number, bw: number, dtOffset: number) => both([{ x: 0, B: xw, C: xw + bw }, { dt: dtOffset }]);
  const packedBc = (bw: number) => both([{ B: 0, C: bw }]);
  const extremes = (_a: Record<string, unknown>, v: Record<string, Float64Array>) => {
    for (let i = 0; i < v.lambda.length; i += 3) v.lambda[i] = i % 2 === 0 ? 12 : -12;
    for (let i = 1; i < v.dt.length; i += 5) v.dt[i] = 24;
  };
  const forward = (args: Record<string, unknown>, v: Record<string, Float64Array>) => {
    const a = args as { batch: number; seqLen: number; heads: number; headDim: number };
    oracle.mamba3ScanForward(args as never, { ...v, y: new Float64Array(a.batch * a.seqLen * a.heads * a.headDim) });
  };
  const derive = (more?: (args: Record<string, unknown>, v: Record<string, Float64Array>) => void) =>
    backward
      ? (args: Record<string, unknown>, v: Record<string, Float64Array>) => {
          more?.(args, v);
          forward(args, v);
        }
      : more;
  return [
    d("one", s(1, 1, 1, 1, 1, 2, 1), rope),
    d("prime", s(1, 7, 2, 5, 1, 4, 4), { ...rope, label: "short last chunk" }),
    d("odd", s(2, 13, 4, 6, 2, 6, 5), { ...rope, label: "2 heads per group" }),
    d("options", s(1, 6, 2, 3, 1, 4, 1), { label: "chunk 1, no rotation" }),
    d("options", s(1, 9, 3, 4, 3, 7, 16), { label: "one chunk, a group per head, odd state" }),
    d("batch", s(3, 10, 2, 8, 1, 8, 4), rope),
    d("strided", s(2, 11, 2, 4, 1, 6, 4, { xRowStride: 20, bcRowStride: 20, dtRowStride: 29 }), { ...rope, shared: packedXbc(8, 6, 3), label: "conv layout, odd offsets" }),
    d("strided", s(1, 17, 4, 3, 2, 6, 8, { bcRowStride: 24, dtRowStride: 7 }), { ...rope, shared: packedBc(12), label: "B and C of one projection, 2 groups" }),
    d("special", s(2, 19, 2, 4, 1, 4, 8), { ...rope, derive: extremes, label: "λ near 0 and 1, Δ past 20" }),
    d("long", s(1, 300, 2, 8, 1, 16, 64), { ...rope, label: "short last chunk" }),
    d("large", s(2, 128, 4, 32, 1, 32, 64), rope),
    d("large", s(1, 256, 2, 64, 1, 64, 64), { label: "Mamba2 head and state, no rotation" }),
  ].map((c) => ({ ...c, derive: derive(c.derive) }));
};

const specials = [0, -0, 1, -1, 65504, 65520, 70000, -1e30, 3e38, 1e-8, 6e-8, 1e-40, 2 ** -24, 2 ** -25, 1.00390625, 1.005859375, Infinity, -Infinity, NaN];
const withSpecials = (key: string) => (_a: Record<string, unknown>, v: Record<string, Float64Array>) => {
  for (let i = 0; i < v[key].length; i++) v[key][i] = specials[i % specials.length];
};

/**
 * A kernel's cases again with its gradient output in f32 (`key`: "f32"), for bf16 and f16:
 * mixed precision keeps parameter gradients in f32. The chosen shapes, plus `more`.
 */
function withF32Grads(base: Defs, key: string, shapes: readonly ShapeClass[], more: Def[] = []): Defs {
  return (dtype) => {
    const cases = base(dtype);
    if (dtype === "f32") return cases;
    const wide = [...cases.filter((c) => shapes.includes(c.shape)), ...more];
    return [...cases, ...wide.map((c) => ({ ...c, args: { ...c.args, [key]: "f32" } }))];
  };
}

/**
 * A matmul's A with NaN between its stored rows (the columns past A's row length, before
 * lda): a kernel that reads them into a product shows it (NaN times even a zero is NaN).
 */
const nanBetweenRowsOfA = (a: Record<string, unknown>, v: Record<string, Float64Array>) => {
  const rows = a.transA ? (a.k as number) : (a.m as number), cols = a.transA ? (a.m as number) : (a.k as number), lda = a.lda as number;
  for (let r = 0; r + 1 < rows; r++) v.a.fill(Number.NaN, r * lda + cols, (r + 1) * lda);
};

/** Every element of the named operands set to one value: sums far past f16's largest finite value, 65504. */
const constants = (values: Record<string, number>) => (_a: Record<string, unknown>, v: Record<string, Float64Array>) => {
  for (const [key, value] of Object.entries(values)) v[key].fill(value);
};

const CASES: Record<KernelName, Defs> = {
  matmul: withF32Grads(() => [
    d("one", { m: 1, n: 1, k: 1 }),
    d("prime", { m: 7, n: 13, k: 37 }),
    d("odd", { m: 33, n: 65, k: 17 }),
    d("options", { m: 19, n: 23, k: 29, transA: true }),
    d("options", { m: 19, n: 23, k: 29, transB: true }),
    d("options", { m: 17, n: 31, k: 9, transA: true, transB: true, alpha: 0.5, accumulate: true }, { present: ["bias"], label: "transA transB alpha accumulate bias" }),
    d("batch", { m: 5, n: 9, k: 11, batch: 3 }),
    d("batch", { m: 6, n: 10, k: 7, batch: 4, strideB: 0, transB: true }, { label: "broadcast B" }),
    d("options", { m: 19, n: 23, k: 29, lda: 37 }, { label: "lda", derive: nanBetweenRowsOfA }),
    d("options", { m: 17, n: 31, k: 9, transA: true, lda: 24, accumulate: true }, { label: "transA lda accumulate", derive: nanBetweenRowsOfA }),
    d("batch", { m: 5, n: 9, k: 11, batch: 3, lda: 13 }, { label: "lda" }),
    // One column or one row of C: the matrix-vector paths, A read down its column when transposed.
    d("options", { m: 9, n: 1, k: 7, transA: true, lda: 12 }, { label: "one column, transA lda", derive: nanBetweenRowsOfA }),
    d("options", { m: 1, n: 5, k: 7, transA: true, lda: 3 }, { label: "one row, transA lda", derive: nanBetweenRowsOfA }),
    d("long", { m: 3, n: 5, k: 4099 }),
    d("large", { m: 128, n: 192, k: 160 }, { present: ["bias"] }),
    // A's rows 16-byte aligned around an odd count (a padded vocabulary's first columns): a head's weight gradient and d(hidden).
    d("large", { m: 129, n: 40, k: 72, transA: true, lda: 136, accumulate: true }, { label: "transA lda accumulate, whole 16-byte rows", derive: nanBetweenRowsOfA }),
    d("large", { m: 40, n: 64, k: 153, lda: 160 }, { label: "lda, whole 16-byte rows", derive: nanBetweenRowsOfA }),
  ], "cDtype", ["prime", "options", "batch", "large"], [d("special", { m: 3, n: 5, k: 300, accumulate: true }, { derive: constants({ a: 16, b: 16 }), label: "sums past 65504" })]),
  sumRows: withF32Grads(() => [
    d("one", { rows: 1, cols: 1 }),
    d("prime", { rows: 7, cols: 13 }),
    d("odd", { rows: 33, cols: 65, accumulate: true }),
    d("large", { rows: 300, cols: 97 }),
    d("large", { rows: 130, cols: 264, accumulate: true }, { label: "whole 16-byte rows" }),
  ], "gradDtype", ["prime", "odd", "large"], [d("special", { rows: 300, cols: 5, accumulate: true }, { derive: constants({ x: 300 }), label: "sums past 65504" })]),
  embeddingForward: () => [
    d("one", { count: 1, vocab: 1, dim: 1 }),
    d("prime", { count: 7, vocab: 13, dim: 37 }),
    d("odd", { count: 65, vocab: 50, dim: 33 }),
    d("large", { count: 512, vocab: 300, dim: 96 }),
  ],
  embeddingBackward: withF32Grads(() => [
    d("one", { count: 1, vocab: 1, dim: 1 }),
    d("prime", { count: 7, vocab: 13, dim: 37 }),
    d("odd", { count: 65, vocab: 50, dim: 33 }, { label: "repeated ids" }),
    d("large", { count: 512, vocab: 300, dim: 96 }),
    d("long", { count: 300, vocab: 3, dim: 37 }, { label: "long runs of one id" }),
    d("large", { count: 64, vocab: 40_000, dim: 3 }, { label: "a large vocabulary" }),
  ], "gradDtype", ["prime", "odd", "large", "long"]),
  layerNormForward: () => [
    ...normShapes.map((s) => ({ ...s, args: { ...s.args, eps: 1e-5 }, present: ["bias"] })),
    d("options", { rows: 9, dim: 17, eps: 1e-3 }, { label: "no bias" }),
    d("in-place", { rows: 9, dim: 31, eps: 1e-5 }, { present: ["bias"], inPlace: ["out", "x"] }),
    ...residualForwardShapes.map((s) => ({ ...s, args: { ...s.args, eps: 1e-5 }, present: ["bias", ...s.present!] })),
  ],
  layerNormBackward: withF32Grads(() =>
    [...normShapes, d("options", { rows: 9, dim: 17 }, { label: "no bias" }), ...residualGradientShapes].map((s) => ({
      ...s,
      present: [...(s.label === "no bias" ? [] : ["dBias"]), ...(s.present ?? [])],
      derive: deriveFrom("layerNormForward", { mean: "mean", rstd: "rstd" }, {}),
      args: { ...s.args, eps: 1e-5 },
    })), "gradDtype", ["prime", "odd", "options", "large"]),
  rmsNormForward: () => [
    ...normShapes.map((s) => ({ ...s, args: { ...s.args, eps: 1e-6 } })),
    d("in-place", { rows: 9, dim: 31, eps: 1e-6 }, { inPlace: ["out", "x"] }),
    ...residualForwardShapes.map((s) => ({ ...s, args: { ...s.args, eps: 1e-6 } })),
    ...weightOffsetShapes.map((s) => ({ ...s, args: { ...s.args, eps: 1e-6 } })),
  ],
  rmsNormBackward: withF32Grads(() =>
    [...normShapes, ...residualGradientShapes, ...weightOffsetShapes].map((s) => ({ ...s, args: { ...s.args, eps: 1e-6 }, derive: deriveFrom("rmsNormForward", { rstd: "rstd" }) })), "gradDtype", ["prime", "odd", "large"]),
  geluForward: () => unarySizes("geluForward"),
  geluBackward: withF32Grads(() => [...unarySizes("geluBackward"), ...columnSumShapes], "gradDtype", [], columnSumShapes.slice(0, 2)),
  siluForward: () => unarySizes("siluForward"),
  siluBackward: withF32Grads(() => [...unarySizes("siluBackward"), ...columnSumShapes], "gradDtype", [], columnSumShapes.slice(0, 2)),
  swiGluForward: () => gatedSizes("swiGluForward"),
  swiGluBackward: () => gatedSizes("swiGluBackward"),
  ropeForward: () => ropeShapes,
  ropeBackward: () => ropeShapes,
  attentionForward: () => attentionCases(false),
  attentionBackward: () => attentionCases(true).map((s) => ({ ...s, derive: deriveFrom("attentionForward", { out: "out", lse: "lse" }) })),
  crossEntropyForward: () => ceShapes(false),
  crossEntropyBackward: () => ceShapes(true),
  softmaxForward: () => [
    d("one", { rows: 1, dim: 1 }),
    d("prime", { rows: 7, dim: 13 }),
    d("long", { rows: 3, dim: 4099, temperature: 0.7 }),
    d("large", { rows: 64, dim: 2048 }),
    d("in-place", { rows: 9, dim: 31 }, { inPlace: ["out", "x"] }),
  ],
  add: () => [
    ...unarySizes("add").filter((s) => s.shape !== "in-place"),
    d("in-place", { n: 257 }, { inPlace: ["out", "a"] }),
    d("in-place", { n: 31 }, { inPlace: ["out", "b"] }),
    // Operands at odd element offsets: off any vector alignment (the element-by-element paths).
    d("odd", { n: 1023 }, { shared: [{ a: 1 }, { out: 3 }], label: "n=1023 a and out at odd offsets" }),
  ],
  scale: () => [
    ...unarySizes("scaleForward").map((s) => ({ ...s, args: { ...s.args, alpha: -0.37 } })),
    d("odd", { n: 1023, alpha: 1.5 }, { shared: [{ x: 5 }], label: "n=1023 x at an odd offset" }),
  ],
  dropout: () => [
    ...unarySizes("dropoutForward").map((s) => ({ ...s, args: { ...s.args, p: 0.1, seed: 12345 } })),
    d("options", { n: 4099, p: 0, seed: 7 }, { label: "p=0: a copy" }),
    d("options", { n: 4099, p: 0.5, seed: 0xffffffff }, { label: "p=0.5, the largest seed" }),
    d("odd", { n: 1023, p: 0.3, seed: 99 }, { shared: [{ x: 5 }], label: "n=1023 x at an odd offset" }),
  ],
  sum: () => [d("one", { n: 1 }), d("prime", { n: 37 }), d("long", { n: 4099, accumulate: true }), d("large", { n: 100_003 })],
  sumSquares: () => [d("one", { n: 1 }), d("prime", { n: 37 }), d("long", { n: 4099, accumulate: true }), d("large", { n: 100_003 })],
  adamW: (dtype) => {
    const hp = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: 3 };
    return [
      d("one", { n: 1, ...hp }),
      d("prime", { n: 37, ...hp, step: 1, weightDecay: 0 }),
      d("odd", { n: 1023, ...hp, gradScale: 0.25 }),
      d("large", { n: 100_003, ...hp }),
      ...(dtype === "f32"
        ? []
        : [
            d("options", { n: 4099, ...hp, step: 7 }, { present: ["master"], label: "f32 master" }),
            // Mixed precision's update: f32 gradients and masters, the 16-bit parameters rounded from them.
            d("options", { n: 4099, ...hp, step: 7, gradDtype: "f32" }, { present: ["master"], label: "f32 master and gradients" }),
            d("large", { n: 100_003, ...hp, gradDtype: "f32", gradScale: 0.5 }, { present: ["master"], label: "f32 master and gradients" }),
          ]),
    ];
  },
  cast: () => [],
  fill: () => [],
  // Operands placed at odd element offsets (shared with one member) start off any vector alignment.
  // K (T=9, H=4, 16) of multi-head latent attention: k_nope (10) from the kv projection (T, H*18), k_rope (6) broadcast.
  copyStrided: () => [
    d("one", cp(1, 1, 1, [1, 1], [1, 1])),
    d("one", cp(1, 1, 1, [0, 0], [0, 0]), { label: "zero strides on unit dims" }),
    d("prime", cp(1, 7, 13, [91, 13], [91, 13]), { label: "dense" }),
    d("odd", cp(3, 5, 33, [200, 37], [170, 34]), { shared: [{ src: 3 }, { dst: 1 }], label: "gaps both sides, odd offsets" }),
    d("strided", cp(9, 4, 6, [6, 0], [64, 16]), { shared: [{ dst: 10 }], label: "mla k_rope broadcast to every head" }),
    d("strided", cp(9, 4, 10, [72, 18], [64, 16]), { label: "mla k_nope out of the kv projection" }),
    d("options", cp(9, 4, 10, [64, 16], [72, 18], true), { label: "mla backward: dK into the kv projection's gradient" }),
    d("options", cp(5, 3, 7, [40, 11], [30, 9], true), { shared: [{ src: 3 }, { dst: 5 }], label: "accumulate, odd offsets" }),
    // Rows, strides and offsets in whole 16-byte groups: the vectorised paths.
    d("strided", cp(16, 4, 32, [256, 64], [192, 48]), { label: "rows of 16-byte groups" }),
    d("options", cp(6, 8, 24, [0, 24], [256, 32], true), { label: "rows of 16-byte groups, src broadcast over batch, accumulate" }),
    d("batch", cp(4, 3, 33, [0, 40], [99, 33]), { label: "src broadcast over batch" }),
    d("batch", cp(6, 5, 3, [15, 3], [3, 18]), { label: "rows outer: b and r swapped" }),
    d("long", cp(2, 3, 4099, [12300, 4100], [12297, 4099]), { shared: [{ dst: 1 }] }),
    d("large", cp(1, 1000, 37, [37000, 37], [37000, 37])),
    d("large", cp(8, 125, 37, [5000, 40], [4625, 37], true)),
    d("special", cp(2, 3, 19, [57, 19], [60, 20]), { derive: withSpecials("src") }),
  ],
  conv1dCausalForward: () => conv1dShapes(false),
  conv1dCausalBackward: withF32Grads(() => conv1dShapes(true), "gradDtype", ["prime", "odd", "strided", "large"]),
  ssdScanForward: () => ssdShapes(false),
  ssdScanBackward: withF32Grads(() => ssdShapes(true), "gradDtype", ["prime", "odd", "strided", "large"]),
  mamba3ScanForward: () => mamba3Shapes(false),
  mamba3ScanBackward: withF32Grads(() => mamba3Shapes(true), "gradDtype", ["prime", "odd", "strided", "large"]),
  moeRoute: () => routeShapes(false),
  moeRouteBackward: () => routeShapes(true),
  moeDispatch: () => moveShapes(true),
  moeCombine: () => moveShapes(true, true),
  moeCombineScaleGrad: () => moveShapes(false),
  groupedMatmul: () => groupedShapes(false),
  groupedMatmulWeightGrad: withF32Grads(() => groupedShapes(true), "gradDtype", ["prime", "odd", "large"]),
  checkFinite: () => [
    d("one", { n: 1 }),
    d("prime", { n: 37 }, { label: "all finite" }),
    d("special", { n: 4099 }, { derive: (_a, v) => (v.x[4098] = Infinity) }),
    d("special", { n: 1023 }, { derive: (_a, v) => (v.x[511] = NaN), label: "nan" }),
    d("large", { n: 100_003 }, { derive: (_a, v) => (v.x[77_777] = -Infinity) }),
  ],
};

/** The cast cases: every float dtype pair, with specials (NaN, inf, overflow, subnormals, ties). */
function castCases(src: FloatDType): ConformanceCase[] {
  return FLOAT_DTYPES.flatMap((dst) =>
    [d("prime", { n: 37 }), d("large", { n: 100_003 }), d("special", { n: specials.length }, { derive: withSpecials("src") })].map((c) => ({
      kernel: "cast" as const,
      dtype: src,
      shape: c.shape,
      label: `to ${dst} ${dimsLabel(c.args)}`,
      args: { ...c.args, srcDtype: src, dstDtype: dst },
      derive: c.derive,
    })),
  );
}

function fillCases(dtype: DType): ConformanceCase[] {
  const value = dtype === "f32" || dtype === "bf16" || dtype === "f16" ? -1.5 : 7;
  return [d("one", { n: 1, value }), d("prime", { n: 37, value }), d("large", { n: 100_003, value: 0 })].map((c) => ({
    kernel: "fill" as const,
    dtype,
    shape: c.shape,
    label: dimsLabel(c.args),
    args: { ...c.args, dtype },
  }));
}

/** Every conformance case for the given dtypes (default: f32, bf16, f16; fill also tries i32). */
export function conformanceCases(dtypes: readonly FloatDType[] = FLOAT_DTYPES): ConformanceCase[] {
  const out: ConformanceCase[] = [];
  for (const kernel of KERNEL_NAMES) {
    for (const dtype of dtypes) {
      if (kernel === "cast") {
        out.push(...castCases(dtype));
        continue;
      }
      if (kernel === "fill") {
        out.push(...fillCases(dtype));
        continue;
      }
      for (const def of CASES[kernel](dtype)) {
        out.push({ kernel, dtype, ...def, label: def.label ? `${dimsLabel(def.args)} (${def.label})` : dimsLabel(def.args), args: { ...def.args, dtype } });
      }
    }
  }
  if (dtypes.includes("f32")) out.push(...fillCases("i32"));
  return out;
}
