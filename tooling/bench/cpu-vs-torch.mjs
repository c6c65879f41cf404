// kiln on the CPU against the PyTorch a user installs today (pip's torch 2.x: MKL, oneDNN,
// AVX-512) and, where present, Debian's python3-torch 1.13, training the same GPT-2 side by
// side on this machine: each run its own process, runs alternating (kiln with its native
// kernels, kiln with WebAssembly alone (KILN_NATIVE=0), pip's torch, Debian's torch, then
// again), 2 threads each; every step timed from the first (cold) one, the median over all the
// runs' steps (the best beside it), tokens/s at the median, peak RSS and the ratios, with the commands.
// Configs: bench-tiny, bench-small (models/bench-*.yaml), and shakespeare-char: the model and
// batch of nanoGPT's character-level Shakespeare recipe (6 layers, 6 heads, 384 wide, 256
// characters a row, 64 rows; its vocabulary of 65), one step timed as the recipe's steps are
// (dropout aside: both sides train without it).
// pip's torch goes into a virtual environment this script makes (pip install torch), kept in
// $XDG_CACHE_HOME (or ~/.cache) under kiln-bench-torch; KILN_TORCH_PYTHON names another Python.
// Usage: node tooling/bench/cpu-vs-torch.mjs [--configs bench-tiny,bench-small,shakespeare-char] [--rounds 3]
// Needs the workspace built (pnpm turbo run build).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const CONFIGS = {
  "bench-tiny": { layers: 4, heads: 4, hidden: 256, vocab: 4096, seq: 128, batch: 8, steps: 10 },
  "bench-small": { layers: 6, heads: 6, hidden: 384, vocab: 8192, seq: 256, batch: 8, steps: 5 },
  "shakespeare-char": { layers: 6, heads: 6, hidden: 384, vocab: 65, seq: 256, batch: 64, steps: 3 },
};
const { values } = parseArgs({ options: { configs: { type: "string", default: Object.keys(CONFIGS).join(",") }, rounds: { type: "string", default: "3" } } });
const rounds = Number(values.rounds);

/** pip's torch in a virtual environment of its own, made once. */
function pipTorchPython() {
  if (process.env.KILN_TORCH_PYTHON) return process.env.KILN_TORCH_PYTHON;
  const venv = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "kiln-bench-torch");
  const python = path.join(venv, "bin", "python");
  if (!fs.existsSync(python)) {
    console.error(`cpu-vs-torch: installing pip's torch into ${venv} (python3 -m venv, pip install torch numpy)`);
    execFileSync("python3", ["-m", "venv", venv], { stdio: "inherit" });
    execFileSync(path.join(venv, "bin", "pip"), ["install", "-q", "torch", "numpy"], { stdio: "inherit" });
  }
  return python;
}
const hasTorch = (python) => {
  try {
    execFileSync(python, ["-c", "import torch"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
};

const pip = pipTorchPython();
const SIDES = {
  kiln: { command: process.execPath, script: path.join(here, "train-step-kiln.mjs"), env: {} },
  "kiln-wasm-only": { command: process.execPath, script: path.join(here, "train-step-kiln.mjs"), env: { KILN_NATIVE: "0" } },
  "pytorch-pip": { command: pip, script: path.join(here, "train_step_torch.py"), env: {} },
  ...(hasTorch("/usr/bin/python3") ? { "pytorch-debian": { command: "/usr/bin/python3", script: path.join(here, "train_step_torch.py"), env: {} } } : {}),
};
const lastJson = (text) => JSON.parse(text.trim().split("\n").at(-1));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const commandOf = (side, args) => [...Object.entries(side.env).map(([k, v]) => `${k}=${v}`), side.command === process.execPath ? "node" : side.command, path.relative(process.cwd(), side.script), ...args].join(" ");

const report = { machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`, rounds, configs: {} };
for (const name of values.configs.split(",")) {
  const cfg = CONFIGS[name];
  if (!cfg) throw new Error(`unknown config ${name}: use ${Object.keys(CONFIGS).join(", ")}`);
  // Timed from a cold start: the first step counts (torch's script always runs one first; kiln warms up none).
  const args = Object.entries({ ...cfg, threads: 2, warmup: 1 }).flatMap(([k, v]) => [`--${k}`, String(v)]);
  const runs = Object.fromEntries(Object.keys(SIDES).map((s) => [s, []]));
  for (let r = 0; r < rounds; r++) {
    for (const [s, side] of Object.entries(SIDES)) {
      const env = { ...process.env, ...side.env, OMP_NUM_THREADS: "2" };
      runs[s].push(lastJson(execFileSync(side.command, [side.script, ...args], { encoding: "utf8", env, maxBuffer: 1 << 24 })));
    }
  }
  const out = { ...cfg };
  for (const [s, rs] of Object.entries(runs)) {
    const steps = rs.flatMap((r) => r.step_ms);
    out[s] = {
      ms_per_step_median: median(steps),
      ms_per_step_best: Math.min(...steps),
      steps_timed: steps.length,
      tokens_per_s: (cfg.batch * cfg.seq) / (median(steps) / 1000),
      peak_rss_bytes: median(rs.map((r) => r.peak_rss_bytes)),
      ...(rs[0].torch ? { torch: rs[0].torch } : { backend: rs[0].backend }),
      command: commandOf(SIDES[s], args),
    };
  }
  for (const s of Object.keys(SIDES).filter((k) => k.startsWith("pytorch"))) {
    out[`kiln_over_${s.replace("-", "_")}`] = out.kiln.tokens_per_s / out[s].tokens_per_s;
    out[`kiln_wasm_only_over_${s.replace("-", "_")}`] = out["kiln-wasm-only"].tokens_per_s / out[s].tokens_per_s;
  }
  report.configs[name] = out;
}
console.log(JSON.stringify(report, null, 2));
