#!/usr/bin/env node
// Causal attention forward and backward on @kiln/kernels-wasm; prints one JSON object.
//
//   node tooling/bench/attention-wasm.mjs [--batch 8] [--seq-len 256] [--heads 6] [--kv-heads 6]
//                                         [--head-dim 64] [--dtype f32] [--repeats 5] [--threads 1,2]
//
// Needs the package built: pnpm --filter "@kiln/kernels-wasm..." build
// GFLOP/s use the contract's counts: forward 4*B*H*D*T(T+1)/2 (two causal
// T x T x D products), backward 2.5x that. Each kernel is warmed up with many
// short calls, then a few at the measured size (V8 optimises a wasm function only
// after it has run a while, and the worker threads' share needs its own calls).
// Figures are best-of-repeats; other processes on the cores lower the 2-thread ones.
import os from "node:os";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { loadKernelsWasm } from "./load-kernels-wasm.mjs";

const round = (x, digits = 2) => Number(x.toFixed(digits));
const BYTES = { f32: 4, bf16: 2, f16: 2 };

function fill(backend, buffer, n, dtype, seed) {
  const values = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (s * 1664525 + 1013904223) >>> 0;
    values[i] = s / 2 ** 32 - 0.5;
  }
  if (dtype === "f32") return backend.upload(buffer, values);
  // bf16 bits by truncation, f16 bits of small values: bench data, not a conversion.
  const bits = new Uint16Array(n);
  const u32 = new Uint32Array(values.buffer);
  for (let i = 0; i < n; i++) bits[i] = dtype === "bf16" ? u32[i] >>> 16 : ((u32[i] >>> 16) & 0x8000) | 0x3800 | ((u32[i] >>> 13) & 0x3ff);
  backend.upload(buffer, bits);
}

/** Operands of one attention call in `backend`'s memory (every operand its own buffer). */
export function allocAttention(backend, dims) {
  const { batch: B, seqLen: T, heads: H, kvHeads: KH, headDim: D, dtype } = dims;
  const sizes = { q: B * T * H * D, k: B * T * KH * D, v: B * T * KH * D, out: B * T * H * D, dOut: B * T * H * D };
  Object.assign(sizes, { dQ: sizes.q, dK: sizes.k, dV: sizes.v });
  const bufs = {};
  let seed = 1;
  for (const [key, n] of Object.entries(sizes)) {
    bufs[key] = backend.alloc(n * BYTES[dtype]);
    fill(backend, bufs[key], n, dtype, seed++);
  }
  bufs.lse = backend.alloc(B * H * T * 4);
  return bufs;
}

function time(fn, repeats) {
  const seconds = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    fn();
    seconds.push((performance.now() - t0) / 1000);
  }
  return Math.min(...seconds);
}

/**
 * Forward and backward GFLOP/s on each thread count.
 * `createWasmBackend` is @kiln/kernels-wasm's export (passed in so tests can use the sources).
 */
export async function benchAttention(createWasmBackend, options = {}) {
  const dims = {
    batch: options.batch ?? 8,
    seqLen: options.seqLen ?? 256,
    heads: options.heads ?? 6,
    kvHeads: options.kvHeads ?? options.heads ?? 6,
    headDim: options.headDim ?? 64,
    dtype: options.dtype ?? "f32",
  };
  const repeats = options.repeats ?? 5;
  const forwardFlops = 4 * dims.batch * dims.heads * dims.headDim * ((dims.seqLen * (dims.seqLen + 1)) / 2);
  const results = {};
  for (const threads of options.threads ?? [1, 2]) {
    const backend = await createWasmBackend({ threads, measurePeak: false });
    try {
      const warm = { ...dims, batch: 1, seqLen: 64, heads: 2, kvHeads: 2 };
      const small = allocAttention(backend, warm);
      const bufs = allocAttention(backend, dims);
      const forward = (d, b) => backend.kernels.attentionForward({ ...d, q: b.q, k: b.k, v: b.v, out: b.out, lse: b.lse });
      const backward = (d, b) => backend.kernels.attentionBackward({ ...d, ...b });
      forward(dims, bufs);
      const deadline = performance.now() + (options.warmUpMs ?? 1500);
      while (performance.now() < deadline) {
        forward(warm, small);
        backward(warm, small);
      }
      for (let i = 0; i < (options.warmUpCalls ?? 10); i++) {
        forward(dims, bufs);
        backward(dims, bufs);
      }
      const fwd = time(() => forward(dims, bufs), repeats);
      const bwd = time(() => backward(dims, bufs), repeats);
      results[`${threads}thread${threads > 1 ? "s" : ""}`] = {
        forward: { seconds: round(fwd, 5), gflops: round(forwardFlops / fwd / 1e9, 1) },
        backward: { seconds: round(bwd, 5), gflops: round((2.5 * forwardFlops) / bwd / 1e9, 1) },
        simd: backend.capabilities().device.simd,
      };
    } finally {
      backend.dispose();
    }
  }
  return { dims, results };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      batch: { type: "string", default: "8" },
      "seq-len": { type: "string", default: "256" },
      heads: { type: "string", default: "6" },
      "kv-heads": { type: "string" },
      "head-dim": { type: "string", default: "64" },
      dtype: { type: "string", default: "f32" },
      repeats: { type: "string", default: "5" },
      threads: { type: "string", default: "1,2" },
    },
  });
  const { createWasmBackend } = await loadKernelsWasm();
  const result = await benchAttention(createWasmBackend, {
    batch: Number(values.batch),
    seqLen: Number(values["seq-len"]),
    heads: Number(values.heads),
    kvHeads: Number(values["kv-heads"] ?? values.heads),
    headDim: Number(values["head-dim"]),
    dtype: values.dtype,
    repeats: Number(values.repeats),
    threads: values.threads.split(",").map(Number),
  });
  const machine = { cpu: os.cpus()[0]?.model, cores: os.availableParallelism(), node: process.version, loadAverage1m: round(os.loadavg()[0]) };
  console.log(JSON.stringify({ bench: "attention-wasm", date: new Date().toISOString(), machine, ...result }, null, 2));
}
