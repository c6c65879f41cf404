import type { ConformanceCase } from "@kiln/contract/conformance";
import { describeCasesOnSchedules } from "./support/simulator.js";
import { TRANSPOSE_PAIRS, transposeLabel } from "./support/transposes.js";

// The pipelined tensor-core matmul (csrc/matmul_mma.cu: mma.sync, ldmatrix, a
// 4-stage cp.async ring) on shapes the conformance suite does not reach, against the
// f64 reference: k = 32 * 4 stages * 3 + 8 (the ring wraps three times, then a
// zero-filled tail), m and n multiples of 8 but not of the tile, 128 x 128 tiles (picked by
// KILN_MATMUL_TILES=large: a shape would take 128 of them to be given them by default,
// which the simulator runs for minutes) and 64 x 64 ones, batches with strides and a broadcast
// operand, every transA / transB pair, bias + accumulate + alpha, and C in f32. Two
// cases whose layout rules out 16-byte copies check the fallback to the WMMA kernel.
// Slow (about a minute: every mma and ldmatrix is a warp exchange in the simulator).
const K = 32 * 4 * 3 + 8;

const pairs = TRANSPOSE_PAIRS;
const t = transposeLabel;

const largeTileCases: ConformanceCase[] = [
  // 128 x 128 tiles: 2 x 2 tiles per item x 2 items; B broadcast, padded A and C strides.
  ...pairs.map((p, i): ConformanceCase => {
    const m = 200, n = 136, batch = 2;
    const dtype = i % 2 === 0 ? "bf16" : "f16";
    const args = { m, n, k: K, batch, ...p, strideA: m * K + 8, strideB: 0, strideC: m * n + (i < 2 ? 2 : 3), alpha: 0.75, accumulate: true, ...(i === 1 ? { cDtype: "f32" } : {}) };
    return { kernel: "matmul", dtype, shape: "large", label: `128x128 tiles ${t(p)} bias accumulate alpha${i === 1 ? " f32 C" : ""}`, args, present: ["bias"] };
  }),
];

const cases: ConformanceCase[] = [
  // 64 x 64 tiles: A broadcast, B strided with padding.
  ...pairs.map((p, i): ConformanceCase => {
    const m = 72, n = 88, batch = 3;
    const dtype = i % 2 === 0 ? "f16" : "bf16";
    const args = { m, n, k: K, batch, ...p, strideA: 0, strideB: K * n + 16, alpha: -1.5, accumulate: i >= 2, ...(i === 2 ? { cDtype: "f32" } : {}) };
    return { kernel: "matmul", dtype, shape: "batch", label: `64x64 tiles ${t(p)}${i >= 2 ? " accumulate" : ""}${i === 2 ? " f32 C" : ""}`, args, present: i % 2 === 0 ? ["bias"] : [] };
  }),
  // k = 8: one step, mostly zero fill; odd n (single-column stores at the edge).
  { kernel: "matmul", dtype: "bf16", shape: "odd", label: "k=8 odd n", args: { m: 65, n: 67, k: 8, transB: true } },
  // Leading dimension or batch stride not a multiple of 8: the WMMA kernel runs.
  { kernel: "matmul", dtype: "f16", shape: "options", label: "lda 100 (falls back)", args: { m: 40, n: 48, k: 100, transB: true } },
  { kernel: "matmul", dtype: "bf16", shape: "batch", label: "strideB 4 past 8 (falls back)", args: { m: 40, n: 48, k: 64, batch: 2, strideB: 64 * 48 + 4 } },
];

// Every case in order; every other one also reversed and with warps in turn.
describeCasesOnSchedules("pipelined tensor-core matmul on cuda-sim, 128 x 128 tiles", largeTileCases, (i) => (i % 2 === 0 ? 3 : 1), { KILN_MATMUL_TILES: "large" });
describeCasesOnSchedules("pipelined tensor-core matmul on cuda-sim", cases, (i) => (i % 2 === 0 ? 3 : 1));
