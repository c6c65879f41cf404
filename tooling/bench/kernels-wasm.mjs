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
// then, on the default build, cross-entropy (2048 x 8192 logits), AdamW (14M parameters),
// add, sumSquares and cast (10M elements) in ms and GB/s (loss-optimizer-wasm.mjs),
// and, where tooling/bench's own dependencies are installed, TensorFlow.js's
// wasm backend matMul at the same size.
// V8 runs a wasm function in its baseline tier until it has been called often
// enough, so every kernel is warmed up with many short calls before timing.
import os from "node:os";
import { parseArgs } from "node:util";
import { benchTfjsMatmul } from "./tfjs-matmul.mjs";
import { benchLossOptimizer } from "./loss-optimizer-wasm.mjs";

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

const kernelsUrl = new URL("../../packages/kernels-wasm/dist/index.js", import.meta.url);
const { createKernels, createWasmBackend } = await import(kernelsUrl.href).catch((cause) => {
  console.error('bench: @kiln/kernels-wasm is not built; run `pnpm --filter "@kiln/kernels-wasm..." build` first (builds @kiln/contract too)');
  throw cause;
});

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
      smallerGemm: scaling,
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
  tfjsWasmMatmul: tfjs,
  ...(comparison ? { kilnVsTfjs: comparison } : {}),
};
console.log(JSON.stringify(result, null, 2));
