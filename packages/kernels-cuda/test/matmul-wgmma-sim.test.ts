import type { ConformanceCase } from "@kiln/contract/conformance";
import { describeCasesOnSchedules } from "./support/simulator.js";
import { TRANSPOSE_PAIRS, transposeLabel } from "./support/transposes.js";

// The Hopper matmul (csrc/matmul_wgmma.cu: wgmma from 128-byte-swizzled shared memory,
// a 4-stage cp.async ring) on the simulator, which emulates wgmma's descriptors,
// swizzle and fragments (csrc/sim/wgmma_sim.h), against the f64 reference:
// k = 64 * 4 stages * 2 + 24 (the ring wraps twice, then a zero-filled tail; 64 * 5 + 24
// for the largest cases), m and n multiples of 8 but not of the tile, 128 x 256 tiles
// (picked by KILN_MATMUL_TILES=large: a shape would take 128 of them to be given them by
// default, which the simulator runs for minutes) and 128 x 128 ones, every transA / transB pair (K-major and MN-major
// descriptors for both operands), batches with strides and a broadcast operand, bias +
// accumulate + alpha, and C in f32. KILN_MATMUL_PATH=wgmma (read when a backend opens)
// puts every bf16/f16 matmul with 16-byte copies on this kernel (conformance-sim.test.ts
// runs the suite's matmul cases so too). Slow: every wgmma is a warpgroup exchange and
// 128 x 16 x BN products in the simulator.
const K = 64 * 4 * 2 + 24;
const K_LARGE = 64 * 5 + 24;

const pairs = TRANSPOSE_PAIRS;
const t = transposeLabel;

const largeTileCases: ConformanceCase[] = [
  // 128 x 256 tiles: 2 x 2 tiles per item x 2 items; B broadcast, padded A and C strides.
  ...pairs.map((p, i): ConformanceCase => {
    const m = 136, n = 264, batch = 2;
    const dtype = i % 2 === 0 ? "bf16" : "f16";
    const args = { m, n, k: K_LARGE, batch, ...p, strideA: m * K_LARGE + 8, strideB: 0, strideC: m * n + (i < 2 ? 2 : 3), alpha: 0.75, accumulate: true, ...(i === 1 ? { cDtype: "f32" } : {}) };
    return { kernel: "matmul", dtype, shape: "large", label: `128x256 tiles ${t(p)} bias accumulate alpha${i === 1 ? " f32 C" : ""}`, args, present: ["bias"] };
  }),
];

const cases: ConformanceCase[] = [
  // 128 x 128 tiles: A broadcast, B strided with padding.
  ...pairs.map((p, i): ConformanceCase => {
    const m = 200, n = 136, batch = 2;
    const dtype = i % 2 === 0 ? "f16" : "bf16";
    const args = { m, n, k: K, batch, ...p, strideA: 0, strideB: K * n + 16, alpha: -1.5, accumulate: i >= 2, ...(i === 2 ? { cDtype: "f32" } : {}) };
    return { kernel: "matmul", dtype, shape: "batch", label: `128x128 tiles ${t(p)}${i >= 2 ? " accumulate" : ""}${i === 2 ? " f32 C" : ""}`, args, present: i % 2 === 0 ? ["bias"] : [] };
  }),
  // k = 8: one step, mostly zero fill; odd n (single-column stores at the edge).
  { kernel: "matmul", dtype: "bf16", shape: "odd", label: "k=8 odd n", args: { m: 65, n: 67, k: 8, transB: true } },
  // Leading dimension not a multiple of 8: the kernel refuses, the WMMA kernel runs.
  { kernel: "matmul", dtype: "f16", shape: "options", label: "lda 100 (falls back)", args: { m: 40, n: 48, k: 100, transB: true } },
];

// Every case in order; the first and every other smaller one also reversed and with warps in turn.
describeCasesOnSchedules("wgmma matmul on cuda-sim, 128 x 256 tiles", largeTileCases, (i) => (i === 0 ? 3 : 1), { KILN_MATMUL_PATH: "wgmma", KILN_MATMUL_TILES: "large" });
describeCasesOnSchedules("wgmma matmul on cuda-sim", cases, (i) => (i % 2 === 0 ? 3 : 1), { KILN_MATMUL_PATH: "wgmma" });
