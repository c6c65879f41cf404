// kiln vs PyTorch training steps, side by side on this machine: runs alternate
// (kiln, torch, kiln, torch, ...) in separate processes; prints JSON with the
// medians and the ratio. Usage: node tooling/bench/train-step.mjs [bench-tiny|bench-small] [rounds]
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
const which = process.argv[2] ?? "bench-tiny";
const rounds = Number(process.argv[3] ?? 3);
const cfg = CONFIGS[which];
if (!cfg) throw new Error(`unknown config ${which}: use ${Object.keys(CONFIGS).join(" or ")}`);
const args = Object.entries({ ...cfg, threads: 2 }).flatMap(([k, v]) => [`--${k}`, String(v)]);
const python = process.env.KILN_TORCH_PYTHON ?? "/usr/bin/python3";

// Debian's python3-torch is built against the generic BLAS interface: what it runs is
// whatever provides libblas.so.3. Measured twice: with the reference BLAS that a plain
// `apt-get install python3-torch` brings, and with OpenBLAS (libopenblas0-pthread) when present.
const REFERENCE_BLAS = "/usr/lib/x86_64-linux-gnu/blas";
const OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread";
const torchVariants = { "pytorch-reference-blas": REFERENCE_BLAS, "pytorch-openblas": OPENBLAS };
const withoutOpenblasOverrides = () => {
  const env = { ...process.env };
  delete env.OPENBLAS_CORETYPE;
  delete env.OPENBLAS_L2_SIZE;
  return env;
};

const runs = { kiln: [], ...Object.fromEntries(Object.keys(torchVariants).map((k) => [k, []])) };
const lastJson = (text) => JSON.parse(text.trim().split("\n").at(-1));
for (let r = 0; r < rounds; r++) {
  runs.kiln.push(lastJson(execFileSync(process.execPath, [path.join(here, "train-step-kiln.mjs"), ...args], { encoding: "utf8" })));
  for (const [name, dir] of Object.entries(torchVariants)) {
    if (!fs.existsSync(path.join(dir, "libblas.so.3"))) continue;
    const env = { ...withoutOpenblasOverrides(), LD_LIBRARY_PATH: dir };
    runs[name].push(lastJson(execFileSync(python, [path.join(here, "train_step_torch.py"), ...args], { encoding: "utf8", env })));
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
  report[name] = { ...t, torch: runs[name][0].torch, threads: runs[name][0].threads };
  report[`${name}_tokens_per_s_ratio`] = kiln.tokens_per_s / t.tokens_per_s;
  report[`${name}_peak_rss_ratio`] = kiln.peak_rss_bytes / t.peak_rss_bytes;
}
console.log(JSON.stringify(report, null, 2));
