#!/usr/bin/env node
// Data parallel on the CPU through `kiln train`, bench-tiny, side by side in one run:
//   1 rank x 2 threads at batch 8   against
//   2 ranks x 1 thread at batch 4 each, for every host sync path given (cpu: shared memory; gloo)
// on the same global batches. Prints one JSON object: per setup the median tokens/s over
// the logged steps after the first two, in every round, and against the one-rank run the
// largest relative loss difference per step and the largest absolute weight difference
// of final.safetensors (what "2 ranks learn what 1 rank learns" means in numbers).
//
//   node tooling/bench/data-parallel-cpu.mjs [--steps 20] [--rounds 3] [--syncs cpu,gloo]
//
// Needs the CLI built (pnpm turbo run build). Rounds alternate the setups, so a machine
// that slows down during the run slows all of them.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const kiln = path.join(root, "packages", "cli", "dist", "bin", "kiln.js");
const { values: args } = parseArgs({ options: { steps: { type: "string", default: "20" }, rounds: { type: "string", default: "3" }, syncs: { type: "string", default: "cpu,gloo" } } });
const steps = Number(args.steps);
const rounds = Number(args.rounds);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-bench-dp-"));
// Tokens below bench-tiny's vocabulary (4096), a fixed pseudo-random stream.
const tokens = new Uint32Array(400_000);
let x = 12345;
for (let i = 0; i < tokens.length; i++) tokens[i] = (x = (x * 1103515245 + 12345) >>> 0) % 4096;
fs.writeFileSync(path.join(dir, "data.bin"), Buffer.from(tokens.buffer));

const common = ["train", "-f", path.join(root, "models", "bench-tiny.yaml"), "-d", path.join(dir, "data.bin"), "--max-steps", String(steps), "--log-interval", "1", "--eval-interval", "100000", "--save-interval", "100000", "--target-device", "cpu", "--headless"];
const setups = [
  { name: "1 rank x 2 threads", args: ["--batch-size", "8", "--threads", "2"] },
  ...args.syncs.split(",").map((sync) => ({ name: `2 ranks x 1 thread (${sync})`, args: ["--ranks", "2", "--sync-backend", sync, "--batch-size", "4", "--threads", "1"] })),
];

function run(setup, round) {
  const out = path.join(dir, `${setup.name.replace(/\W+/g, "-")}-${round}`);
  const stdout = execFileSync(process.execPath, [kiln, ...common, ...setup.args, "--output-dir", out], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const lines = stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((l) => l.loss !== undefined);
  return { lines, weights: readSafetensors(path.join(out, "final.safetensors")) };
}

function readSafetensors(file) {
  const bytes = fs.readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString("utf8"));
  const tensors = new Map();
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__" || t.dtype !== "F32") continue;
    const [a, b] = t.data_offsets;
    tensors.set(name, new Float32Array(bytes.buffer.slice(bytes.byteOffset + 8 + n + a, bytes.byteOffset + 8 + n + b)));
  }
  return tensors;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = new Map(setups.map((s) => [s.name, []]));
for (let r = 0; r < rounds; r++) for (const s of setups) results.get(s.name).push(run(s, r));

const reference = results.get(setups[0].name)[0];
const report = { bench: "data-parallel-cpu", config: "bench-tiny", steps, rounds, machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`, load_average_1min: Number(os.loadavg()[0].toFixed(2)), setups: {} };
for (const s of setups) {
  const runs = results.get(s.name);
  const perRound = runs.map((run) => median(run.lines.slice(2).map((l) => l["tokens/s"])));
  let lossRel = 0;
  let weightAbs = 0;
  const first = runs[0];
  for (const [i, l] of first.lines.entries()) lossRel = Math.max(lossRel, Math.abs(l.loss - reference.lines[i].loss) / reference.lines[i].loss);
  for (const [name, w] of reference.weights) {
    const v = first.weights.get(name);
    for (let i = 0; i < w.length; i++) weightAbs = Math.max(weightAbs, Math.abs(v[i] - w[i]));
  }
  report.setups[s.name] = {
    tokens_per_s_median: Math.round(median(perRound)),
    tokens_per_s_rounds: perRound.map(Math.round),
    max_loss_rel_diff_vs_1_rank: Number(lossRel.toExponential(2)),
    max_weight_abs_diff_vs_1_rank: Number(weightAbs.toExponential(2)),
  };
}
const base = report.setups[setups[0].name].tokens_per_s_median;
for (const s of setups.slice(1)) report.setups[s.name].throughput_ratio_vs_1_rank = Number((report.setups[s.name].tokens_per_s_median / base).toFixed(3));
fs.rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(report, null, 2));
