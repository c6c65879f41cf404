#!/usr/bin/env node
// Sliding-window attention beside full causal attention on @kiln/kernels-wasm, same
// shapes, same process; prints one JSON object with the time ratio full / window.
//
//   node tooling/bench/sliding-window-wasm.mjs [--batch 2] [--seq-len 1024] [--window 128]
//        [--heads 8] [--head-dim 64] [--dtype f32] [--calls 10] [--threads N]
//
// Needs the package built: pnpm --filter "@kiln/kernels-wasm..." build
// Each kernel's first call is timed on its own (cold), then --calls more: their median
// is the figure, their best stands beside it. Full and window calls alternate, so
// other load on the cores falls on both alike.
import os from "node:os";
import { parseArgs } from "node:util";
import { allocAttention } from "./attention-wasm.mjs";
import { loadKernelsWasm } from "./load-kernels-wasm.mjs";

const { values } = parseArgs({
  options: {
    batch: { type: "string", default: "2" },
    "seq-len": { type: "string", default: "1024" },
    window: { type: "string", default: "128" },
    heads: { type: "string", default: "8" },
    "head-dim": { type: "string", default: "64" },
    dtype: { type: "string", default: "f32" },
    calls: { type: "string", default: "10" },
    threads: { type: "string" },
  },
});
const round = (x, digits = 4) => Number(x.toFixed(digits));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const dims = {
  batch: Number(values.batch),
  seqLen: Number(values["seq-len"]),
  heads: Number(values.heads),
  kvHeads: Number(values.heads),
  headDim: Number(values["head-dim"]),
  dtype: values.dtype,
};
const window = Number(values.window);
const calls = Number(values.calls);
const threads = Number(values.threads ?? os.availableParallelism());

const { createWasmBackend } = await loadKernelsWasm();
const backend = await createWasmBackend({ threads, measurePeak: false });
const bufs = allocAttention(backend, dims);
const variants = { full: dims, window: { ...dims, window } };
const kernels = {
  forward: (d) => backend.kernels.attentionForward({ ...d, q: bufs.q, k: bufs.k, v: bufs.v, out: bufs.out, lse: bufs.lse }),
  backward: (d) => backend.kernels.attentionBackward({ ...d, ...bufs }),
};
const seconds = (fn) => {
  const t0 = performance.now();
  fn();
  return (performance.now() - t0) / 1000;
};

const results = {};
for (const [pass, run] of Object.entries(kernels)) {
  const times = { full: [], window: [] };
  const cold = {};
  for (const v of Object.keys(variants)) cold[v] = seconds(() => run(variants[v]));
  for (let i = 0; i < calls; i++) for (const v of Object.keys(variants)) times[v].push(seconds(() => run(variants[v])));
  const fig = (v) => ({ coldSeconds: round(cold[v]), medianSeconds: round(median(times[v])), bestSeconds: round(Math.min(...times[v])) });
  results[pass] = {
    full: fig("full"),
    window: fig("window"),
    fullOverWindow: round(median(times.full) / median(times.window), 2),
    fullOverWindowBest: round(Math.min(...times.full) / Math.min(...times.window), 2),
  };
}
backend.dispose();
const machine = { cpu: os.cpus()[0]?.model, cores: os.availableParallelism(), threads, node: process.version, loadAverage1m: round(os.loadavg()[0], 2) };
console.log(JSON.stringify({ bench: "sliding-window-wasm", date: new Date().toISOString(), machine, dims, window, calls, results }, null, 2));
