#!/usr/bin/env node
// Benchmark of @kiln/kernels-wasm; prints one JSON object on stdout.
//
//   node tooling/bench/kernels-wasm.mjs [--size 1024] [--repeats 5] [--threads N]
//
// Needs the package and its dependencies built: pnpm --filter "@kiln/kernels-wasm..." build
// For each SIMD build (plain mul+add, relaxed fused madd):
//   ceiling  register-only f32x4 multiply-add GFLOP/s on 1 thread and on all threads
//   gemm     size^3 f32 matmul GFLOP/s on 1 thread and on all threads (zero-copy buffers),
//            its fraction of the ceiling, and time(all threads) / time(1 thread)
//   gemmBf16, gemmF16   the same with A, B and C stored in bf16 / f16 (f32 sums)
//   oneRow   1 x 3072 x 768 matmuls (one token through a GPT-2 small MLP weight) on all
//            threads, B stored (k, n) and transposed, f32 and bf16
// then, on the default build, every matmul shape of a bench-small training step, forward and
// backward, next to TensorFlow.js's wasm matMul on the same shapes (training-matmuls.mjs),
// cross-entropy (2048 x 8192 logits), AdamW (14M parameters),
// add, sumSquares and cast (10M elements) in ms and GB/s (loss-optimizer-wasm.mjs),
// causal attention forward and backward GFLOP/s at batch 8, seqLen 256, 6 heads of 64 (attention-wasm.mjs),
// LayerNorm and GELU forward and backward GB/s at 2048 rows of 384 and 1536, f32 / bf16 / f16 (norm-activation-wasm.mjs),
// groupedMatmul and its weight gradient, 8 groups over 2048 rows x 512 x 512, next to one plain
// matmul of the same size, f32 and bf16 (grouped-matmul-wasm.mjs),
// Mamba2's ssdScan and Mamba3's mamba3Scan (without and with the rotation) forward and backward
// at batch 4, seqLen 256, 8 heads of 64, 1 group, stateSize 64, chunkSize 64, f32 and bf16, in
// ms and GFLOP/s (scan-wasm.mjs),
// and, where tooling/bench's own dependencies are installed, TensorFlow.js's
// wasm backend matMul at the same size.
// V8 runs a wasm function in its baseline tier until it has been called often
// enough, so every kernel is warmed up with many short calls before timing.
import os from "node:os";
import { parseArgs } from "node:util";
import { benchTfjsMatmul } from "./tfjs-matmul.mjs";
import { benchLossOptimizer } from "./loss-optimizer-wasm.mjs";
import { benchAttention } from "./attention-wasm.mjs";
import { benchTrainingMatmuls } from "./training-matmuls.mjs";
import { benchNormActivation } from "./norm-activation-wasm.mjs";
import { benchGroupedMatmul } from "./grouped-matmul-wasm.mjs";
import { loadKernelsWasm } from "./load-kernels-wasm.mjs";
import { SCANS, benchScan } from "./scan-wasm.mjs";

const { values } = parseArgs({
  options: {
    size: { type: "string", default: "1024" },
    repeats: { type: "string", default: "5" },
    threads: { type: "string" },
    "ceiling-seconds": { type: "string", default: "0.3" },
  },
});
const size = Number(values.size);
const repeats = Number(values.repeats);
const threads = values.threads ? Number(values.threads) : os.availableParallelism();
const ceilingSeconds = Number(values["ceiling-seconds"]);

const { createKernels, createWasmBackend, runMatmul } = await loadKernelsWasm();

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (x, digits = 2) => Number(x.toFixed(digits));

function warmUp(kernels) {
  for (let i = 0; i < 3000; i++) kernels.measureCeiling(200, i % 2 ? kernels.info.threads : 1);
  const bufs = [kernels.alloc(64 * 64), kernels.alloc(64 * 64), kernels.alloc(64 * 64)];
  for (const b of bufs) b.array.fill(0.5);
  for (let i = 0; i < 2000; i++) {
    kernels.matmulInto({ a: bufs[0], b: bufs[1], c: bufs[2] }, { m: 64, n: 64, k: 64, threads: i % 2 ? kernels.info.threads : 1 });
  }
  for (const b of bufs) b.free();
}

function ceiling(kernels, nthreads) {
  const probe = kernels.measureCeiling(1e6, nthreads);
  const iterations = Math.max(1e5, Math.round((1e6 * ceilingSeconds) / probe.seconds));
  const runs = Array.from({ length: 3 }, () => kernels.measureCeiling(iterations, nthreads).gflops);
  return Math.max(...runs);
}

function gemm(kernels, n, nthreads) {
  const a = kernels.alloc(n * n);
  const b = kernels.alloc(n * n);
  const c = kernels.alloc(n * n);
  for (let i = 0; i < n * n; i++) {
    a.array[i] = ((i * 7919) % 1000) / 1000 - 0.5;
    b.array[i] = ((i * 104729) % 1000) / 1000 - 0.5;
  }
  const call = () => kernels.matmulInto({ a, b, c }, { m: n, n, k: n, threads: nthreads });
  call();
  const seconds = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    call();
    seconds.push((performance.now() - t0) / 1000);
  }
  for (const buf of [a, b, c]) buf.free();
  const best = Math.min(...seconds);
  return { seconds: round(best, 5), medianSeconds: round(median(seconds), 5), gflops: round((2 * n ** 3) / best / 1e9, 1) };
}

/** Bits of a 16-bit float in [-1, 1) for element i of a benchmark operand (the values do not matter, only that they are normal). */
const halfBits = (dtype, i, salt) => (((i * salt) & 1) << 15) | (dtype === "bf16" ? 0x3f00 + ((i * salt) % 128) : 0x3800 + ((i * salt) % 1024));

/** m x n x k matmul with every operand stored in `dtype` (bf16 or f16), through the runtime's call path. */
function halfMatmul(kernels, runMatmul, o, dtype) {
  const rt = kernels.runtime;
  const sizes = [o.m * o.k, o.k * o.n, o.m * o.n];
  const ptrs = sizes.map((n) => rt.heap.alloc(2 * n));
  for (const [j, salt] of [[0, 7919], [1, 104729]]) {
    const view = new Uint16Array(rt.memory.buffer, ptrs[j], sizes[j]);
    for (let i = 0; i < view.length; i++) view[i] = halfBits(dtype, i, salt);
  }
  const call = {
    m: o.m, n: o.n, k: o.k, batch: 1, a: ptrs[0], b: ptrs[1], c: ptrs[2], bias: 0,
    strideA: sizes[0], strideB: sizes[1], strideC: sizes[2], transA: false, transB: !!o.transB,
    accumulate: false, alpha: 1, dtype,
  };
  return {
    run: (nthreads) => runMatmul(rt, call, nthreads),
    free: () => ptrs.forEach((p) => rt.heap.release(p)),
  };
}

/** Best-of-`repeats` seconds of `run()` after one untimed call. */
function timeBest(run) {
  run();
  const seconds = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    run();
    seconds.push((performance.now() - t0) / 1000);
  }
  return { best: Math.min(...seconds), median: median(seconds) };
}

/** size^3 GEMM in a 16-bit storage dtype on 1 and all threads, after many short calls (V8 tiers each entry up on its own). */
function gemmHalf(kernels, runMatmul, n, dtype, ceil) {
  const small = halfMatmul(kernels, runMatmul, { m: 64, n: 64, k: 300 }, dtype);
  for (let i = 0; i < 1000; i++) small.run(i % 2 ? kernels.info.threads : 1);
  small.free();
  const big = halfMatmul(kernels, runMatmul, { m: n, n, k: n }, dtype);
  try {
    const result = (nthreads, ceiling) => {
      const t = timeBest(() => big.run(nthreads));
      const gflops = round((2 * n ** 3) / t.best / 1e9, 1);
      return { seconds: round(t.best, 5), medianSeconds: round(t.median, 5), gflops, fractionOfCeiling: round(gflops / ceiling, 3) };
    };
    const one = result(1, ceil.oneThread);
    const all = result(threads, ceil.allThreads);
    return { size: n, oneThread: one, allThreads: all, timeRatioAllToOne: round(all.seconds / one.seconds, 3) };
  } finally {
    big.free();
  }
}

/** GFLOP/s of one-row matmuls (a matrix-vector product) on all threads, f32 and bf16, B stored (k, n) or (n, k). */
function oneRow(kernels, runMatmul) {
  const shape = { m: 1, n: 3072, k: 768 };
  const flops = 2 * shape.m * shape.n * shape.k;
  const out = { shape };
  for (const transB of [false, true]) {
    const key = transB ? "transposedB" : "b";
    out[key] = {};
    const f32 = [kernels.alloc(shape.k), kernels.alloc(shape.k * shape.n), kernels.alloc(shape.n)];
    for (const buf of f32) for (let i = 0; i < buf.length; i++) buf.array[i] = ((i * 7919) % 1000) / 1000 - 0.5;
    const o = { ...shape, transB, threads };
    for (let i = 0; i < 200; i++) kernels.matmulInto({ a: f32[0], b: f32[1], c: f32[2] }, o);
    out[key].f32 = round(flops / timeBest(() => kernels.matmulInto({ a: f32[0], b: f32[1], c: f32[2] }, o)).best / 1e9, 1);
    for (const buf of f32) buf.free();
    const bf16 = halfMatmul(kernels, runMatmul, { ...shape, transB }, "bf16");
    for (let i = 0; i < 200; i++) bf16.run(threads);
    out[key].bf16 = round(flops / timeBest(() => bf16.run(threads)).best / 1e9, 1);
    bf16.free();
  }
  return out;
}

/** Microseconds for one empty kernel call on `nthreads` threads: the pool's wake-and-join cost. */
function dispatchMicroseconds(kernels, nthreads) {
  const rt = kernels.runtime;
  const out = rt.heap.alloc(64 * nthreads);
  const { u32 } = rt.argsViews();
  u32[0] = 0; // iterations
  u32[1] = out;
  for (let i = 0; i < 2000; i++) rt.run("kiln_ceiling_madd", nthreads);
  const calls = 20000;
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) rt.run("kiln_ceiling_madd", nthreads);
  const us = ((performance.now() - t0) * 1000) / calls;
  rt.heap.release(out);
  return round(us, 2);
}

async function benchBuild(simd) {
  const kernels = await createKernels({ threads, simd });
  try {
    warmUp(kernels);
    const ceil = { oneThread: round(ceiling(kernels, 1), 1), allThreads: round(ceiling(kernels, threads), 1) };
    const one = gemm(kernels, size, 1);
    const all = gemm(kernels, size, threads);
    const scaling = {};
    for (const n of [128, 256, 512]) {
      const a = gemm(kernels, n, 1);
      const b = gemm(kernels, n, threads);
      scaling[n] = { oneThreadGflops: a.gflops, allThreadsGflops: b.gflops, timeRatioAllToOne: round(b.seconds / a.seconds, 3) };
    }
    return {
      simd: kernels.info.simd,
      tile: kernels.info.matmulTile,
      ceilingGflops: ceil,
      gemm: {
        size,
        oneThread: { ...one, fractionOfCeiling: round(one.gflops / ceil.oneThread, 3) },
        allThreads: { ...all, fractionOfCeiling: round(all.gflops / ceil.allThreads, 3) },
        timeRatioAllToOne: round(all.seconds / one.seconds, 3),
      },
      gemmBf16: gemmHalf(kernels, runMatmul, size, "bf16", ceil),
      gemmF16: gemmHalf(kernels, runMatmul, size, "f16", ceil),
      smallerGemm: scaling,
      oneRow: oneRow(kernels, runMatmul),
      dispatchMicroseconds: { oneThread: dispatchMicroseconds(kernels, 1), allThreads: dispatchMicroseconds(kernels, threads) },
    };
  } finally {
    await kernels.dispose();
  }
}


const builds = {};
for (const simd of ["plain", "relaxed"]) {
  try {
    builds[simd] = await benchBuild(simd);
  } catch (error) {
    builds[simd] = { error: String(error?.message ?? error) };
  }
}

const lossOptimizer = await benchLossOptimizer(createWasmBackend, { threads: [...new Set([1, threads])], repeats }).catch((error) => ({
  error: String(error?.message ?? error),
}));

const attention = await benchAttention(createWasmBackend, { threads: [...new Set([1, threads])], repeats }).catch((error) => ({
  error: String(error?.message ?? error),
}));

const normActivation = await benchNormActivation(createWasmBackend, { threads: [...new Set([1, threads])] }).catch((error) => ({
  error: String(error?.message ?? error),
}));

const groupedMatmul = await benchGroupedMatmul(createWasmBackend, { threads: [...new Set([1, threads])], repeats: Math.max(repeats, 9) }).catch((error) => ({
  error: String(error?.message ?? error),
}));

const scans = {};
for (const name of Object.keys(SCANS)) {
  scans[name] = await benchScan(createWasmBackend, [...new Set([1, threads])], name, timeBest).catch((error) => ({ error: String(error?.message ?? error) }));
}

const trainingMatmuls = await benchTrainingMatmuls(createKernels, { threads, repeats }).catch((error) => ({
  error: String(error?.message ?? error),
}));

const tfjs = await benchTfjsMatmul(size, repeats).catch((error) => ({ error: String(error?.message ?? error) }));
const best = builds.relaxed?.gemm ? builds.relaxed : builds.plain;
const comparison =
  tfjs.gflops && best?.gemm
    ? {
        oneThreadSpeedup: round(best.gemm.oneThread.gflops / tfjs.gflops, 2),
        allThreadsSpeedup: round(best.gemm.allThreads.gflops / tfjs.gflops, 2),
        kilnBuild: best.simd,
      }
    : undefined;

const result = {
  bench: "kernels-wasm",
  date: new Date().toISOString(),
  machine: {
    cpu: os.cpus()[0]?.model,
    cores: os.availableParallelism(),
    node: process.version,
    arch: process.arch,
    // Other processes on the cores skew the all-threads figures: compare with the ceiling's scaling.
    loadAverage1m: round(os.loadavg()[0], 2),
  },
  threads,
  builds,
  lossOptimizer,
  trainingMatmuls,
  attention,
  normActivation,
  groupedMatmul,
  ...scans,
  tfjsWasmMatmul: tfjs,
  ...(comparison ? { kilnVsTfjs: comparison } : {}),
};
console.log(JSON.stringify(result, null, 2));
