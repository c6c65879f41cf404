#!/usr/bin/env node
// f32 matmuls on all threads while other processes keep cores busy, as on a laptop or a
// shared machine: each measurement is a fresh process (createKernels, 15 calls, median),
// run with 0, 1, 2 ... busy-loop processes beside it. With --against DIR, a second build of
// @kiln/kernels-wasm (a copy of another checkout's packages/kernels-wasm/dist) is measured
// too, alternating with this one, so two builds compare under the same load.
// Prints one JSON line per shape and load: median milliseconds per build, every round's figure.
//
//   node tooling/bench/gemm-contended.mjs [--competitors 0,1,2] [--rounds 5] [--against DIR]
// Needs @kiln/kernels-wasm built.
import { execFileSync, spawn } from "node:child_process";
import os from "node:os";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { median } from "./lib/train-runs.mjs";

const { values } = parseArgs({
  options: {
    competitors: { type: "string", default: "0,1,2" },
    rounds: { type: "string", default: "5" },
    against: { type: "string" },
    child: { type: "string" },
    shape: { type: "string" },
  },
});
const SHAPES = [
  { name: "1024^3", m: 1024, n: 1024, k: 1024, transA: false, transB: false },
  { name: "bwd dW attn c_proj", m: 384, n: 384, k: 2048, transA: true, transB: false },
  { name: "bwd dX attn c_proj", m: 2048, n: 384, k: 384, transA: false, transB: true },
  { name: "fwd mlp c_fc", m: 2048, n: 1536, k: 384, transA: false, transB: false },
];
const threads = Math.min(2, os.availableParallelism());

if (values.child) {
  const { createKernels } = await import(new URL("index.js", `file://${values.child}/`).href);
  const s = SHAPES.find((x) => x.name === values.shape);
  const kernels = await createKernels({ threads });
  const bufs = [s.m * s.k, s.k * s.n, s.m * s.n].map((x) => kernels.alloc(x));
  for (const b of bufs.slice(0, 2)) for (let i = 0; i < b.array.length; i++) b.array[i] = ((i * 7919) % 1000) / 1000 - 0.5;
  const ms = [];
  for (let c = 0; c < 15; c++) {
    const t0 = performance.now();
    kernels.matmulInto({ a: bufs[0], b: bufs[1], c: bufs[2] }, { m: s.m, n: s.n, k: s.k, transA: s.transA, transB: s.transB, threads });
    ms.push(performance.now() - t0);
  }
  await kernels.dispose();
  console.log(median(ms));
  process.exit(0);
}

const builds = { this: fileURLToPath(new URL("../../packages/kernels-wasm/dist", import.meta.url)) };
if (values.against) builds.against = values.against;
const rounds = Number(values.rounds);
const once = (dist, shape) => Number(execFileSync(process.execPath, [fileURLToPath(import.meta.url), "--child", dist, "--shape", shape], { encoding: "utf8" }).trim());

for (const competitors of values.competitors.split(",").map(Number)) {
  const busy = Array.from({ length: competitors }, () => spawn(process.execPath, ["-e", "for (;;);"], { stdio: "ignore" }));
  try {
    for (const s of SHAPES) {
      const ms = Object.fromEntries(Object.keys(builds).map((b) => [b, []]));
      for (let r = 0; r < rounds; r++) for (const [b, dist] of Object.entries(builds)) ms[b].push(once(dist, s.name));
      const row = { shape: s.name, threads, competitors };
      for (const [b, xs] of Object.entries(ms)) row[`${b}_ms`] = Number(median(xs).toFixed(2));
      row.rounds = Object.fromEntries(Object.entries(ms).map(([b, xs]) => [b, xs.map((x) => Number(x.toFixed(2)))]));
      console.log(JSON.stringify(row));
    }
  } finally {
    for (const p of busy) p.kill();
  }
}
