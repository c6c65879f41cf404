// The same `kiln train` run repeated in fresh processes: does the MFU it logs agree from
// run to run, and does it stay at or below 1? Each run trains one config from scratch
// (built-in corpus, same seed) into its own temporary folder; the runs of the configs
// alternate. Per run: the median and the mean of the logged MFU windows after the first
// (which holds the cold start), the highest window, tokens/s the same way. Per config: the
// spread of the run medians, (max - min) / min. Prints one JSON line per config, then a summary.
// Usage: node mfu-repeat.mjs [--runs 3] [--threads 2] [--config nano-start:300 --config bench-small:30]
//        (needs the workspace built; the CPU peak is measured once and cached like any kiln run)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { median } from "./lib/train-runs.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const { values } = parseArgs({
  options: { runs: { type: "string" }, threads: { type: "string" }, config: { type: "string", multiple: true } },
});
const runs = Number(values.runs ?? 3);
const threads = String(values.threads ?? 2);
const configs = (values.config ?? ["nano-start:300", "bench-small:30"]).map((c) => {
  const [name, steps] = c.split(":");
  return { name, steps: Number(steps ?? 100) };
});

const mean = (xs) => xs.reduce((s, x) => s + x, 0) / xs.length;
const round = (x, d = 4) => Number(x.toFixed(d));

function trainOnce({ name, steps }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-mfu-${name}-`));
  try {
    const args = [path.join(repo, "packages/cli/dist/bin/kiln.js"), "train", "-f", path.join(repo, "models", `${name}.yaml`)];
    args.push("--max-steps", String(steps), "--headless", "--threads", threads, "--output-dir", dir, "--save-interval", String(steps * 10), "--eval-interval", String(steps * 10));
    const out = execFileSync(process.execPath, args, { encoding: "utf8", maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "pipe"] });
    const lines = out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((l) => typeof l.mfu === "number");
    if (lines.length < 3) throw new Error(`${name}: only ${lines.length} logged windows; give it more steps`);
    const later = lines.slice(1);
    const mfu = later.map((l) => l.mfu);
    const tps = later.map((l) => l["tokens/s"]);
    return { mfu_median: round(median(mfu)), mfu_mean: round(mean(mfu)), mfu_max: round(Math.max(...lines.map((l) => l.mfu))), tokens_per_s_median: round(median(tps), 1), windows: lines.length };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const results = new Map(configs.map((c) => [c.name, []]));
const loadBefore = os.loadavg()[0];
for (let r = 0; r < runs; r++) for (const c of configs) results.get(c.name).push(trainOnce(c));

const summary = { cpu: os.cpus()[0]?.model.trim(), threads: Number(threads), runs, load_before: round(loadBefore, 2), load_after: round(os.loadavg()[0], 2), configs: {} };
for (const c of configs) {
  const rs = results.get(c.name);
  const medians = rs.map((x) => x.mfu_median);
  const means = rs.map((x) => x.mfu_mean);
  const spread = (xs) => round((Math.max(...xs) - Math.min(...xs)) / Math.min(...xs));
  const row = { config: c.name, steps: c.steps, runs: rs, spread_of_medians: spread(medians), spread_of_means: spread(means), highest_window: Math.max(...rs.map((x) => x.mfu_max)) };
  console.log(JSON.stringify(row));
  summary.configs[c.name] = { spread_of_medians: row.spread_of_medians, spread_of_means: row.spread_of_means, highest_window: row.highest_window, within_5_percent: row.spread_of_medians <= 0.05, at_most_1: row.highest_window <= 1 };
}
console.log(JSON.stringify(summary));
