// kiln vs PyTorch training steps, side by side on this machine: runs alternate
// (kiln, torch, kiln, torch, ...) in separate processes; prints JSON with the
// medians and the ratio. Usage: node tooling/bench/train-step.mjs [bench-tiny|bench-small] [rounds]
import { execFileSync } from "node:child_process";
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

const runs = { kiln: [], pytorch: [] };
for (let r = 0; r < rounds; r++) {
  runs.kiln.push(JSON.parse(execFileSync(process.execPath, [path.join(here, "train-step-kiln.mjs"), ...args], { encoding: "utf8" }).trim().split("\n").at(-1)));
  runs.pytorch.push(JSON.parse(execFileSync(python, [path.join(here, "train_step_torch.py"), ...args], { encoding: "utf8" }).trim().split("\n").at(-1)));
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = (rs) => ({
  ms_per_step: median(rs.map((r) => r.ms_per_step)),
  tokens_per_s: median(rs.map((r) => r.tokens_per_s)),
  peak_rss_bytes: median(rs.map((r) => r.peak_rss_bytes)),
});
const kiln = summary(runs.kiln);
const torch = summary(runs.pytorch);
console.log(
  JSON.stringify(
    {
      config: which,
      ...cfg,
      rounds,
      kiln: { ...kiln, effective_gflops: median(runs.kiln.map((r) => r.effective_gflops)), planned_bytes: runs.kiln[0].planned_bytes, backend: runs.kiln[0].backend },
      pytorch: { ...torch, torch: runs.pytorch[0].torch, threads: runs.pytorch[0].threads },
      tokens_per_s_ratio: kiln.tokens_per_s / torch.tokens_per_s,
      peak_rss_ratio: kiln.peak_rss_bytes / torch.peak_rss_bytes,
    },
    null,
    2,
  ),
);
