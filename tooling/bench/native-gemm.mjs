#!/usr/bin/env node
// f32 GEMM on @kiln/kernels-wasm's native kernels (AVX-512 or AVX2, the package's Node
// addon) as a user's first calls see them, against the machine's FMA peak measured in the
// same processes by the addon's own register-only FMA loop, and against the WebAssembly
// kernel. Prints one JSON object.
//
//   node tooling/bench/native-gemm.mjs [--size 1024] [--calls 10] [--rounds 3] [--threads 1,2]
//
// Every round starts a fresh process per (kernel, thread count), alternating: it calls
// createKernels() and times `calls` size^3 matmuls straight away (no warm-up of its own;
// the native ones need none, the WebAssembly ones get the package's usual warm-up at
// creation), then measures the ceiling on its thread count: the native FMA loop (the
// native process; KILN_NATIVE_ISA=avx2 measures the AVX2 one) or the f32x4 one (wasm).
// Reported per thread count: medians over every call of every round with the best beside
// them, GFLOP/s as a fraction of the native peak measured in the native processes, the
// wasm kernel's figures and ceiling, and native over wasm; with the load average and, on
// Linux, the share of CPU time the hypervisor stole meanwhile (a busy host shows there
// first). Needs @kiln/kernels-wasm built with its addon (pnpm --filter @kiln/kernels-wasm build).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";

const { values } = parseArgs({
  options: {
    size: { type: "string", default: "1024" },
    calls: { type: "string", default: "10" },
    rounds: { type: "string", default: "3" },
    threads: { type: "string", default: `1,${os.availableParallelism()}` },
    child: { type: "string" },
    kernel: { type: "string" },
  },
});
const size = Number(values.size);
const calls = Number(values.calls);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The machine's CPU time counters (Linux /proc/stat, jiffies): all, and stolen by the hypervisor; undefined elsewhere. */
function cpuTimes() {
  try {
    const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    return { all: f.reduce((a, b) => a + b, 0), steal: f[7] ?? 0 };
  } catch {
    return undefined;
  }
}
const round = (x, digits = 3) => Number(x.toFixed(digits));

/** The ceiling on `threads` threads: warm-up, one call sized to ~0.3 s, best of three. */
function ceiling(measure, threads) {
  for (let i = 0; i < 10; i++) measure(20_000, threads);
  const probe = measure(200_000, threads);
  const iterations = Math.max(100_000, Math.round((200_000 * 0.3) / probe.seconds));
  return Math.max(...Array.from({ length: 3 }, () => measure(iterations, threads).gflops));
}

/** One process: `calls` timed matmuls from a cold start, then the ceiling. */
async function child(threads, kernel) {
  const { loadKernelsWasm } = await import("./load-kernels-wasm.mjs");
  const { createKernels } = await loadKernelsWasm();
  const native = kernel === "native";
  const kernels = await createKernels({ threads, native });
  if (native && !kernels.info.native.isa) throw new Error(`the native kernels are not running: ${kernels.info.native.reason}`);
  const bufs = [size * size, size * size, size * size].map((n) => kernels.alloc(n));
  // One view per buffer: a view per element would leave garbage that V8 collects on its
  // background threads during the timed calls, on the cores the kernels run on.
  for (const b of bufs.slice(0, 2)) {
    const values = b.array;
    for (let i = 0; i < values.length; i++) values[i] = ((i * 7919) % 1000) / 1000 - 0.5;
  }
  const seconds = [];
  for (let c = 0; c < calls; c++) {
    const t0 = performance.now();
    kernels.matmulInto({ a: bufs[0], b: bufs[1], c: bufs[2] }, { m: size, n: size, k: size, threads });
    seconds.push((performance.now() - t0) / 1000);
  }
  for (const b of bufs) b.free();
  const measure = native ? (it, t) => kernels.measureNativeCeiling(it, t) : (it, t) => kernels.measureCeiling(it, t);
  const peak = ceiling(measure, threads);
  await kernels.dispose();
  console.log(JSON.stringify({ threads, kernel, isa: native ? kernels.info.native.isa : kernels.info.simd, peak, seconds }));
}

if (values.child) {
  await child(Number(values.child), values.kernel);
} else {
  const self = fileURLToPath(import.meta.url);
  const threadCounts = values.threads.split(",").map(Number);
  const runs = {};
  const loadBefore = os.loadavg()[0];
  const timesBefore = cpuTimes();
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const t of threadCounts) {
      for (const kernel of ["native", "wasm"]) {
        const args = [self, "--size", String(size), "--calls", String(calls), "--child", String(t), "--kernel", kernel];
        const out = JSON.parse(execFileSync(process.execPath, args, { encoding: "utf8" }).trim().split("\n").at(-1));
        (runs[`${kernel} ${t}`] ??= []).push(out);
      }
    }
  }
  const flops = 2 * size ** 3;
  const summary = (key, peak) => {
    const xs = runs[key].flatMap((r) => r.seconds);
    const gflops = flops / median(xs) / 1e9, best = flops / Math.min(...xs) / 1e9;
    return {
      isa: runs[key][0].isa,
      median_seconds: round(median(xs), 5),
      best_seconds: round(Math.min(...xs), 5),
      first_call_seconds: round(median(runs[key].map((r) => r.seconds[0])), 5),
      gflops: round(gflops, 1),
      best_gflops: round(best, 1),
      ceiling_gflops: round(median(runs[key].map((r) => r.peak)), 1),
      fraction_of_native_peak: round(gflops / peak),
      best_fraction_of_native_peak: round(best / peak),
    };
  };
  const report = {
    machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`,
    size,
    calls_per_process: calls,
    rounds: Number(values.rounds),
    threads: {},
  };
  for (const t of threadCounts) {
    const peak = median(runs[`native ${t}`].map((r) => r.peak));
    const native = summary(`native ${t}`, peak), wasm = summary(`wasm ${t}`, peak);
    report.threads[t] = { native_peak_gflops: round(peak, 1), native, wasm, native_over_wasm: round(native.gflops / wasm.gflops, 2) };
  }
  if (threadCounts.length > 1) {
    const [one, all] = [threadCounts[0], threadCounts.at(-1)];
    report.native_time_ratio = round(report.threads[all].native.median_seconds / report.threads[one].native.median_seconds);
  }
  const timesAfter = cpuTimes();
  // A virtual machine's vCPUs are not always running: the share the hypervisor took while this ran.
  const steal = timesBefore && timesAfter ? round((timesAfter.steal - timesBefore.steal) / Math.max(1, timesAfter.all - timesBefore.all)) : null;
  console.log(JSON.stringify({ ...report, load_average_before: loadBefore, load_average_after: os.loadavg()[0], cpu_steal_share: steal }, null, 2));
}
