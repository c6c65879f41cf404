// kiln training steps in f32, bf16 and f16 side by side on the wasm backend: each
// dtype in its own process (so peak RSS is its own), rounds alternating
// (f32, bf16, f16, f32, ...); prints JSON with the median step time, tokens/s and
// peak RSS per dtype, and the planned against the measured device peak.
// Usage: node tooling/bench/train-step-dtypes.mjs [bench-tiny|bench-small] [rounds=3]
// Needs packages/core and packages/kernels-wasm built.
import { execFileSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const CONFIGS = {
  "bench-tiny": { layers: 4, heads: 4, hidden: 256, vocab: 4096, seq: 128, batch: 8, steps: 10 },
  "bench-small": { layers: 6, heads: 6, hidden: 384, vocab: 8192, seq: 256, batch: 8, steps: 5 },
};
const DTYPES = ["f32", "bf16", "f16"];
const which = process.argv[2] ?? "bench-small";
const rounds = Number(process.argv[3] ?? 3);
const cfg = CONFIGS[which];
if (!cfg) throw new Error(`unknown config ${which}: use ${Object.keys(CONFIGS).join(" or ")}`);
const args = Object.entries({ ...cfg, threads: 2 }).flatMap(([k, v]) => [`--${k}`, String(v)]);

const runs = Object.fromEntries(DTYPES.map((d) => [d, []]));
const lastJson = (text) => JSON.parse(text.trim().split("\n").at(-1));
for (let r = 0; r < rounds; r++) {
  for (const dtype of DTYPES) {
    runs[dtype].push(lastJson(execFileSync(process.execPath, [path.join(here, "train-step-kiln.mjs"), ...args, "--dtype", dtype], { encoding: "utf8" })));
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const report = { config: which, ...cfg, rounds, machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`, backend: runs.f32[0].backend };
for (const dtype of DTYPES) {
  const rs = runs[dtype];
  report[dtype] = {
    ms_per_step: median(rs.map((r) => r.ms_per_step)),
    ms_per_step_best: Math.min(...rs.map((r) => r.ms_per_step)),
    tokens_per_s: median(rs.map((r) => r.tokens_per_s)),
    peak_rss_bytes: median(rs.map((r) => r.peak_rss_bytes)),
    planned_bytes: rs[0].planned_bytes,
    measured_peak_bytes: rs[0].measured_peak_bytes,
  };
}
for (const dtype of ["bf16", "f16"]) {
  report[`${dtype}_step_time_ratio`] = report[dtype].ms_per_step / report.f32.ms_per_step;
  report[`${dtype}_peak_rss_ratio`] = report[dtype].peak_rss_bytes / report.f32.peak_rss_bytes;
}
console.log(JSON.stringify(report, null, 2));
