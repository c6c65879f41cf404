// kiln vs PyTorch training steps, side by side on this machine: runs alternate
// (kiln, torch, kiln, torch, ...) in separate processes; prints JSON with the
// medians, the ratios and the PyTorch commands it ran.
// Usage: node tooling/bench/train-step.mjs [bench-tiny|bench-small] [rounds] [--reference-blas]
// PyTorch runs on OpenBLAS (`apt-get install libopenblas0-pthread`) twice a round: with
// its autodetected kernel and with OPENBLAS_CORETYPE=SkylakeX; kiln is compared with the
// faster of the two. --reference-blas adds Debian's reference BLAS (much slower).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const CONFIGS = {
  "bench-tiny": { layers: 4, heads: 4, hidden: 256, vocab: 4096, seq: 128, batch: 8, steps: 10 },
  "bench-small": { layers: 6, heads: 6, hidden: 384, vocab: 8192, seq: 256, batch: 8, steps: 5 },
};
const positional = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const which = positional[0] ?? "bench-tiny";
const rounds = Number(positional[1] ?? 3);
const withReferenceBlas = process.argv.includes("--reference-blas");
const cfg = CONFIGS[which];
if (!cfg) throw new Error(`unknown config ${which}: use ${Object.keys(CONFIGS).join(" or ")}`);
const args = Object.entries({ ...cfg, threads: 2 }).flatMap(([k, v]) => [`--${k}`, String(v)]);
const python = process.env.KILN_TORCH_PYTHON ?? "/usr/bin/python3";

// Debian's python3-torch is built against the generic BLAS interface: what it runs is
// whatever provides libblas.so.3, picked here with LD_LIBRARY_PATH. OPENBLAS_CORETYPE and
// OPENBLAS_L2_SIZE are taken out of the environment, and set only where a variant says so.
const REFERENCE_BLAS = "/usr/lib/x86_64-linux-gnu/blas";
const OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread";
const torchVariants = {
  "pytorch-openblas": { dir: OPENBLAS, env: {} },
  "pytorch-openblas-skylakex": { dir: OPENBLAS, env: { OPENBLAS_CORETYPE: "SkylakeX" } },
  ...(withReferenceBlas ? { "pytorch-reference-blas": { dir: REFERENCE_BLAS, env: {} } } : {}),
};
if (!fs.existsSync(path.join(OPENBLAS, "libblas.so.3"))) {
  console.error(`train-step: ${OPENBLAS}/libblas.so.3 is missing; install OpenBLAS with: sudo apt-get install libopenblas0-pthread`);
  process.exit(1);
}
const torchArgs = [path.join(here, "train_step_torch.py"), ...args];
const commandOf = ({ dir, env }) =>
  [`LD_LIBRARY_PATH=${dir}`, ...Object.entries(env).map(([k, v]) => `${k}=${v}`), python, ...torchArgs.map((a) => path.relative(process.cwd(), a) || a)].join(" ");

const runs = { kiln: [], ...Object.fromEntries(Object.keys(torchVariants).map((k) => [k, []])) };
const lastJson = (text) => JSON.parse(text.trim().split("\n").at(-1));
for (let r = 0; r < rounds; r++) {
  runs.kiln.push(lastJson(execFileSync(process.execPath, [path.join(here, "train-step-kiln.mjs"), ...args], { encoding: "utf8" })));
  for (const [name, variant] of Object.entries(torchVariants)) {
    if (!fs.existsSync(path.join(variant.dir, "libblas.so.3"))) continue;
    const { OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, ...inherited } = process.env;
    const env = { ...inherited, LD_LIBRARY_PATH: variant.dir, ...variant.env };
    runs[name].push(lastJson(execFileSync(python, torchArgs, { encoding: "utf8", env })));
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = (rs) => ({
  ms_per_step: median(rs.map((r) => r.ms_per_step)),
  tokens_per_s: median(rs.map((r) => r.tokens_per_s)),
  peak_rss_bytes: median(rs.map((r) => r.peak_rss_bytes)),
});
const kiln = summary(runs.kiln);
const report = {
  config: which,
  ...cfg,
  rounds,
  machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`,
  kiln: { ...kiln, effective_gflops: median(runs.kiln.map((r) => r.effective_gflops)), planned_bytes: runs.kiln[0].planned_bytes, backend: runs.kiln[0].backend },
};
for (const name of Object.keys(torchVariants)) {
  if (runs[name].length === 0) continue;
  const t = summary(runs[name]);
  report[name] = { ...t, torch: runs[name][0].torch, threads: runs[name][0].threads, command: commandOf(torchVariants[name]) };
  report[`${name}_tokens_per_s_ratio`] = kiln.tokens_per_s / t.tokens_per_s;
  report[`${name}_peak_rss_ratio`] = kiln.peak_rss_bytes / t.peak_rss_bytes;
}
// The figure the goal is stated in: kiln against the faster OpenBLAS variant.
const fasterOpenblas = ["pytorch-openblas", "pytorch-openblas-skylakex"].filter((n) => report[n]).sort((a, b) => report[b].tokens_per_s - report[a].tokens_per_s)[0];
report.versus_faster_openblas = { variant: fasterOpenblas, tokens_per_s_ratio: report[`${fasterOpenblas}_tokens_per_s_ratio`] };
console.log(JSON.stringify(report, null, 2));
