#!/usr/bin/env node
// f32 matmuls as a user's first calls see them: each process calls createKernels() and
// then times the calls straight away, with no warm-up of its own. Prints one JSON object.
//
//   node tooling/bench/gemm-first-calls.mjs [--size 1024] [--calls 10] [--rounds 3] [--shapes]
//
// Every round starts a fresh process for 1 thread and one for all threads (alternating),
// each timing `calls` size^3 matmuls and then measuring the f32x4 multiply-add ceiling on
// its thread count. Reported: medians over every call of every round (the best beside it),
// GFLOP/s as a fraction of the ceiling measured in the same processes, and
// time(all threads) / time(1 thread). With --shapes, every matmul of a bench-small
// training step (forward and backward, transposed operands) is timed the same way after
// the big one, with its own ratio and all-threads time over half the 1-thread time.
// Needs @kiln/kernels-wasm built.
import { execFileSync } from "node:child_process";
import os from "node:os";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { TRAINING_MATMULS } from "./training-matmuls.mjs";

const { values } = parseArgs({
  options: {
    size: { type: "string", default: "1024" },
    calls: { type: "string", default: "10" },
    rounds: { type: "string", default: "3" },
    shapes: { type: "boolean", default: false },
    child: { type: "string" },
  },
});
const size = Number(values.size);
const calls = Number(values.calls);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (x, digits = 3) => Number(x.toFixed(digits));

/** One process: createKernels on `threads` threads, then `calls` timed calls per shape, then the ceiling. */
async function child(threads) {
  const { loadKernelsWasm } = await import("./load-kernels-wasm.mjs");
  const { createKernels } = await loadKernelsWasm();
  const kernels = await createKernels({ threads });
  const shapes = [{ name: `${size}^3`, m: size, n: size, k: size, transA: false, transB: false }, ...(values.shapes ? TRAINING_MATMULS : [])];
  const seconds = {};
  for (const s of shapes) {
    const bufs = [s.m * s.k, s.k * s.n, s.m * s.n].map((n) => kernels.alloc(n));
    for (const b of bufs.slice(0, 2)) for (let i = 0; i < b.array.length; i++) b.array[i] = ((i * 7919) % 1000) / 1000 - 0.5;
    seconds[s.name] = [];
    for (let c = 0; c < calls; c++) {
      const t0 = performance.now();
      kernels.matmulInto({ a: bufs[0], b: bufs[1], c: bufs[2] }, { m: s.m, n: s.n, k: s.k, transA: s.transA, transB: s.transB, threads });
      seconds[s.name].push((performance.now() - t0) / 1000);
    }
    for (const b of bufs) b.free();
  }
  const probe = kernels.measureCeiling(1e6, threads);
  const iterations = Math.max(1e5, Math.round((1e6 * 0.3) / probe.seconds));
  const ceiling = Math.max(...Array.from({ length: 3 }, () => kernels.measureCeiling(iterations, threads).gflops));
  await kernels.dispose();
  console.log(JSON.stringify({ threads, ceiling, seconds, flops: Object.fromEntries(shapes.map((s) => [s.name, 2 * s.m * s.n * s.k])) }));
}

if (values.child) {
  await child(Number(values.child));
} else {
  const all = os.availableParallelism();
  const self = fileURLToPath(import.meta.url);
  const args = ["--size", String(size), "--calls", String(calls), ...(values.shapes ? ["--shapes"] : [])];
  const runs = { 1: [], [all]: [] };
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const t of [1, all]) runs[t].push(JSON.parse(execFileSync(process.execPath, [self, ...args, "--child", String(t)], { encoding: "utf8" }).trim().split("\n").at(-1)));
  }
  const summary = (t, name) => {
    const xs = runs[t].flatMap((r) => r.seconds[name]);
    const ceiling = median(runs[t].map((r) => r.ceiling));
    const gflops = runs[t][0].flops[name] / median(xs) / 1e9;
    return { median_seconds: round(median(xs), 5), best_seconds: round(Math.min(...xs), 5), first_call_seconds: round(median(runs[t].map((r) => r.seconds[name][0])), 5), gflops: round(gflops, 1), ceiling_gflops: round(ceiling, 1), fraction_of_ceiling: round(gflops / ceiling) };
  };
  const report = { machine: `${os.cpus()[0].model.trim()}, ${all} cores`, calls_per_process: calls, rounds: Number(values.rounds), shapes: {} };
  for (const name of Object.keys(runs[1][0].seconds)) {
    const one = summary(1, name), many = summary(all, name);
    report.shapes[name] = { one_thread: one, all_threads: many, time_ratio_all_to_one: round(many.median_seconds / one.median_seconds), all_threads_over_ideal: round(many.median_seconds / (one.median_seconds / all)) };
  }
  console.log(JSON.stringify(report, null, 2));
}
