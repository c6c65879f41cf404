#!/usr/bin/env node
// Cross-entropy, AdamW and the memory-bound elementwise kernels of @kiln/kernels-wasm
// at transformer training sizes; prints one JSON object.
//
//   node tooling/bench/loss-optimizer-wasm.mjs [--rows 2048] [--vocab 8192] [--params 14000000]
//                                              [--elements 10000000] [--repeats 5] [--threads 1,2]
//
// Needs the package built: pnpm --filter "@kiln/kernels-wasm..." build
// Figures per dtype and thread count:
//   crossEntropy  forward (lse + losses) and backward (dLogits into its own buffer) of a
//                 rows x vocab logits matrix: milliseconds, G logits/s, and GB/s of memory
//                 traffic (forward reads the logits twice: max pass, then exp-sum pass;
//                 backward reads them once and writes dLogits), and the training loss's one
//                 call (crossEntropyForward writing dLogits too: each row's second read from
//                 the cache) beside the two
//   adamW         one step over `params` parameters: ms, G params/s, GB/s (f32: param, grad,
//                 m, v = 28 bytes a parameter; bf16 with f32 master weights: 30)
//   add           out = a + b over `elements`: GB/s of a + b + out
//   sumSquares    over `elements` (gradient-norm reduction): GB/s read
//   cast          f32 -> bf16 over `elements`: GB/s of src + dst
// Each kernel is warmed up with many short calls on every thread first, then a few at
// the measured size (V8 optimises a wasm function only after it has run a while in
// that thread's instance; a running call never switches).
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { loadKernelsWasm } from "./load-kernels-wasm.mjs";

const round = (x, digits = 2) => Number(x.toFixed(digits));
const BYTES = { f32: 4, bf16: 2, f16: 2, i32: 4 };

/** Uniform values in [lo, hi), stored as `dtype` (bf16 by truncation: bench data, not a conversion). */
function upload(backend, n, dtype, lo, hi, seed) {
  const values = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    values[i] = lo + ((hi - lo) * s) / 2 ** 32;
  }
  const buffer = backend.alloc(n * BYTES[dtype]);
  if (dtype === "f32") backend.upload(buffer, values);
  else backend.upload(buffer, new Uint16Array(new Uint32Array(values.buffer).map((b) => b >>> 16)));
  return buffer;
}

function targetsBuffer(backend, rows, vocab) {
  const t = new Int32Array(rows);
  for (let r = 0; r < rows; r++) t[r] = (r * 7919) % vocab;
  const buffer = backend.alloc(4 * rows);
  backend.upload(buffer, t);
  return buffer;
}

function best(fn, repeats) {
  const seconds = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    fn();
    seconds.push((performance.now() - t0) / 1000);
  }
  return Math.min(...seconds);
}

/** Calls of every kernel and dtype on one backend, at size `s`, as closures; `free` releases the buffers. */
function makeCalls(backend, s) {
  const buffers = [];
  const keep = (b) => (buffers.push(b), b);
  const calls = {};
  for (const dtype of s.dtypes) {
    const { rows, vocab } = s;
    const logits = keep(upload(backend, rows * vocab, dtype, -6, 6, 1));
    const dLogits = keep(backend.alloc(rows * vocab * BYTES[dtype]));
    const targets = keep(targetsBuffer(backend, rows, vocab));
    const losses = keep(backend.alloc(4 * rows));
    const lse = keep(backend.alloc(4 * rows));
    calls[`crossEntropyForward ${dtype}`] = () =>
      backend.kernels.crossEntropyForward({ logits, targets, losses, lse, rows, vocab, dtype });
    calls[`crossEntropyBackward ${dtype}`] = () =>
      backend.kernels.crossEntropyBackward({ logits, targets, lse, dLogits, rows, vocab, lossScale: 1 / rows, dtype });
    calls[`crossEntropyForward+dLogits ${dtype}`] = () =>
      backend.kernels.crossEntropyForward({ logits, targets, losses, lse, dLogits, rows, vocab, lossScale: 1 / rows, dtype });

    const n = s.params;
    const param = keep(upload(backend, n, dtype, -0.1, 0.1, 2));
    const grad = keep(upload(backend, n, dtype, -0.01, 0.01, 3));
    const m = keep(upload(backend, n, "f32", 0, 0, 4));
    const v = keep(upload(backend, n, "f32", 0, 0, 5));
    const master = dtype === "f32" ? undefined : keep(upload(backend, n, "f32", -0.1, 0.1, 6));
    const hp = { lr: 6e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: 10, gradScale: 0.5 };
    calls[`adamW ${dtype}`] = () => backend.kernels.adamW({ param, grad, m, v, ...(master ? { master } : {}), n, ...hp, dtype });

    const e = s.elements;
    const a = keep(upload(backend, e, dtype, -1, 1, 7));
    const b = keep(upload(backend, e, dtype, -1, 1, 8));
    const out = keep(backend.alloc(e * BYTES[dtype]));
    const sum = keep(backend.alloc(4));
    calls[`add ${dtype}`] = () => backend.kernels.add({ a, b, out, n: e, dtype });
    calls[`sumSquares ${dtype}`] = () => backend.kernels.sumSquares({ x: a, out: sum, n: e, dtype });
    if (dtype === "f32") {
      const dst = keep(backend.alloc(e * 2));
      calls["cast f32 bf16"] = () => backend.kernels.cast({ src: a, dst, n: e, srcDtype: "f32", dstDtype: "bf16" });
    }
  }
  return { calls, free: () => buffers.forEach((b) => backend.free(b)) };
}

/** GB/s and call time of every kernel, per dtype, per thread count. */
export async function benchLossOptimizer(createWasmBackend, options = {}) {
  const size = {
    rows: options.rows ?? 2048,
    vocab: options.vocab ?? 8192,
    params: options.params ?? 14_000_000,
    elements: options.elements ?? 10_000_000,
    dtypes: options.dtypes ?? ["f32", "bf16"],
  };
  const repeats = options.repeats ?? 5;
  const results = {};
  for (const threads of options.threads ?? [1, 2]) {
    const backend = await createWasmBackend({ threads, measurePeak: false });
    try {
      // Warm-up calls big enough to wake every thread: each worker's instance tiers up on its own calls.
      const warm = makeCalls(backend, { ...size, rows: 64, vocab: 1000, params: 65_536, elements: 65_536 });
      const deadline = performance.now() + (options.warmUpMs ?? 1500);
      while (performance.now() < deadline) for (const call of Object.values(warm.calls)) call();
      warm.free();
      const { calls, free } = makeCalls(backend, size);
      const seconds = {};
      for (const [name, call] of Object.entries(calls)) {
        for (let i = 0; i < 3; i++) call();
        seconds[name] = best(call, repeats);
      }
      free();
      const r = {};
      for (const dtype of size.dtypes) {
        const w = BYTES[dtype];
        const logits = size.rows * size.vocab;
        const fwd = seconds[`crossEntropyForward ${dtype}`];
        const bwd = seconds[`crossEntropyBackward ${dtype}`];
        const fused = seconds[`crossEntropyForward+dLogits ${dtype}`];
        const adam = seconds[`adamW ${dtype}`];
        const adamBytes = dtype === "f32" ? 28 : 3 * w + 24;
        r[dtype] = {
          crossEntropy: {
            forwardMs: round(fwd * 1e3, 3),
            backwardMs: round(bwd * 1e3, 3),
            forwardBackwardMs: round((fwd + bwd) * 1e3, 3),
            oneCallMs: round(fused * 1e3, 3),
            glogitsPerSecond: round(logits / (fwd + bwd) / 1e9, 3),
            forwardGBps: round((2 * logits * w) / fwd / 1e9, 2),
            backwardGBps: round((2 * logits * w) / bwd / 1e9, 2),
          },
          adamW: {
            ms: round(adam * 1e3, 3),
            gparamsPerSecond: round(size.params / adam / 1e9, 3),
            GBps: round((size.params * adamBytes) / adam / 1e9, 2),
            masterWeights: dtype !== "f32",
          },
          add: { ms: round(seconds[`add ${dtype}`] * 1e3, 3), GBps: round((3 * size.elements * w) / seconds[`add ${dtype}`] / 1e9, 2) },
          sumSquares: { ms: round(seconds[`sumSquares ${dtype}`] * 1e3, 3), GBps: round((size.elements * w) / seconds[`sumSquares ${dtype}`] / 1e9, 2) },
        };
      }
      if (seconds["cast f32 bf16"]) r.castF32ToBf16 = { ms: round(seconds["cast f32 bf16"] * 1e3, 3), GBps: round((6 * size.elements) / seconds["cast f32 bf16"] / 1e9, 2) };
      r.simd = backend.capabilities().device.simd;
      results[`${threads}thread${threads > 1 ? "s" : ""}`] = r;
    } finally {
      backend.dispose();
    }
  }
  return { size, repeats, results };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      rows: { type: "string", default: "2048" },
      vocab: { type: "string", default: "8192" },
      params: { type: "string", default: "14000000" },
      elements: { type: "string", default: "10000000" },
      dtypes: { type: "string", default: "f32,bf16" },
      repeats: { type: "string", default: "5" },
      threads: { type: "string", default: "1,2" },
    },
  });
  const { createWasmBackend } = await loadKernelsWasm();
  const result = await benchLossOptimizer(createWasmBackend, {
    rows: Number(values.rows),
    vocab: Number(values.vocab),
    params: Number(values.params),
    elements: Number(values.elements),
    dtypes: values.dtypes.split(","),
    repeats: Number(values.repeats),
    threads: values.threads.split(",").map(Number),
  });
  console.log(JSON.stringify({ bench: "loss-optimizer-wasm", date: new Date().toISOString(), ...result }, null, 2));
}
