// The CPU peak that MFU is measured against, as kiln got it before (a ~30 ms probe at
// backend creation) and as `kiln train` gets it now (measured until two rounds agree,
// then cached), each measured in a fresh process (a cold start) --runs times.
// Prints one JSON line: per method every figure (GFLOP/s), median, min, max and
// (max - min) / median, with the load average before and after.
// Usage: node cpu-peak.mjs [--runs 7] [--threads 2]   (needs kernels-wasm and cli built)
import { execFileSync } from "node:child_process";
import os from "node:os";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";

const { values } = parseArgs({ options: { runs: { type: "string" }, threads: { type: "string" }, one: { type: "string" } } });
const threads = Number(values.threads ?? 2);
const wasm = new URL("../../packages/kernels-wasm/dist/index.js", import.meta.url).href;
const cli = new URL("../../packages/cli/dist/cpu-peak/stable-peak.js", import.meta.url).href;

if (values.one) {
  // One measurement in this (fresh) process.
  const { createWasmBackend, createKernels } = await import(wasm);
  let gflops;
  const t0 = performance.now();
  if (values.one === "probe") {
    const backend = await createWasmBackend({ threads });
    gflops = backend.capabilities().peakFlops.f32 / 1e9;
    backend.dispose();
  } else {
    const { measureStablePeak } = await import(cli);
    const kernels = await createKernels({ threads });
    gflops = measureStablePeak((iterations) => kernels.measureCeiling(iterations)).flopsPerSecond / 1e9;
    kernels.dispose();
  }
  console.log(JSON.stringify({ gflops, ms: performance.now() - t0 }));
  process.exit(0);
}

const runs = Number(values.runs ?? 7);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = (xs) => ({
  gflops: xs.map((x) => Number(x.toFixed(1))),
  median: Number(median(xs).toFixed(1)),
  min: Number(Math.min(...xs).toFixed(1)),
  max: Number(Math.max(...xs).toFixed(1)),
  spread: Number(((Math.max(...xs) - Math.min(...xs)) / median(xs)).toFixed(3)),
});
const loadBefore = os.loadavg()[0];
const result = { cpu: os.cpus()[0]?.model.trim(), threads, runs };
for (const method of ["probe", "stable"]) {
  const figures = [];
  const ms = [];
  for (let i = 0; i < runs; i++) {
    const out = JSON.parse(execFileSync(process.execPath, [fileURLToPath(import.meta.url), "--one", method, "--threads", String(threads)], { encoding: "utf8" }));
    figures.push(out.gflops);
    ms.push(out.ms);
  }
  result[method] = { ...summary(figures), median_ms: Math.round(median(ms)) };
}
console.log(JSON.stringify({ ...result, load_average_before: loadBefore, load_average_after: os.loadavg()[0] }));
