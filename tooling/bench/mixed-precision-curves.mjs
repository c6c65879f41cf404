// bf16 and f16 against f32: bench-small trained with `kiln train` on the wasm backend
// (built-in story corpus, byte tokens, the same seed) in each dtype; prints JSON with
// the loss at every logged step, the largest relative gap to f32 from step 50 on, the
// validation losses, f16's skipped steps and final loss scale, and whether each stays
// within 2%. The three runs go side by side, one kernel thread each, so partial
// metrics.jsonl files compare at any time. A dtype whose run in out-dir already
// finished (its metrics.jsonl holds the last step's validation loss) is read, not
// rerun (the report marks it "reused"); `dtypes` limits which dtypes run this time.
// Needs packages/cli/dist built.
// Usage: node tooling/bench/mixed-precision-curves.mjs [steps=300] [out-dir] [dtypes=f32,bf16,f16]
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const kiln = path.join(here, "../../packages/cli/dist/bin/kiln.js");
const steps = Number(process.argv[2] ?? 300);
const out = path.resolve(process.argv[3] ?? fs.mkdtempSync(path.join(os.tmpdir(), "kiln-mixed-precision-")));
const FROM_STEP = 50;
const TOLERANCE = 0.02;
const DTYPES = (process.argv[4] ?? "f32,bf16,f16").split(",");

fs.mkdirSync(out, { recursive: true });
const config = path.join(out, "bench-small.yaml");
fs.writeFileSync(
  config,
  `model:
  arch: gpt2
  vocab_size: 8192
  hidden_size: 384
  num_layers: 6
  num_heads: 6
  max_seq_len: 256
trainer:
  batch_size: 8
  seq_len: 256
  max_steps: ${steps}
  learning_rate: 1.0e-3
  min_learning_rate: 1.0e-4
  warmup_steps: 30
  lr_schedule: cosine
  log_interval: 10
  eval_interval: ${steps}
  eval_iters: 10
  save_interval: ${steps}
  seed: 1337
data:
  tokenizer: bytes
`,
);

function train(dtype) {
  return new Promise((resolve, reject) => {
    const args = [kiln, "train", "-f", config, "--dtype", dtype, "--threads", "1", "--headless", "--output-dir", path.join(out, dtype)];
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`kiln train --dtype ${dtype} exited ${code}:\n${stderr}`))));
  });
}

/** The log lines of a finished earlier run of `dtype` in out-dir, or undefined. */
function finishedRun(dtype) {
  const file = path.join(out, dtype, "metrics.jsonl");
  if (!fs.existsSync(file)) return undefined;
  const lines = fs.readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  return lines.some((l) => l.step === steps && "val_loss" in l) ? lines : undefined;
}

const started = performance.now();
const reused = DTYPES.filter((d) => finishedRun(d));
const logs = await Promise.all(DTYPES.map((d) => (reused.includes(d) ? finishedRun(d) : train(d).then((o) => o.trim().split("\n").map((l) => JSON.parse(l))))));
const lines = Object.fromEntries(DTYPES.map((d, i) => [d, logs[i]]));
const losses = (d) => new Map(lines[d].filter((l) => "loss" in l && !l.skipped).map((l) => [l.step, l.loss]));
const valLoss = (d) => lines[d].filter((l) => "val_loss" in l).at(-1)?.val_loss;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

if (!lines.f32) {
  console.log(JSON.stringify({ ran: DTYPES, output_dir: out, compared: false, why: "no finished f32 run in out-dir yet: run again with f32 to compare" }, null, 2));
  process.exit(0);
}
const reference = losses("f32");
const report = {
  config: "bench-small",
  steps,
  machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`,
  threads_per_run: 1,
  wall_seconds: (performance.now() - started) / 1000,
  reused,
  compared_from_step: FROM_STEP,
  tolerance: TOLERANCE,
  f32: { val_loss: valLoss("f32"), final_loss: reference.get(steps), s_per_step_median: median(lines.f32.filter((l) => l["it/s"]).map((l) => 1 / l["it/s"])) },
};
for (const d of ["bf16", "f16"].filter((x) => lines[x])) {
  const mine = losses(d);
  let worst = { step: 0, relative_gap: 0 };
  for (const [step, loss] of reference) {
    if (step < FROM_STEP || !mine.has(step)) continue;
    const gap = Math.abs(mine.get(step) - loss) / loss;
    if (gap > worst.relative_gap) worst = { step, relative_gap: gap };
  }
  const val = valLoss(d);
  const valGap = Math.abs(val - valLoss("f32")) / valLoss("f32");
  const scaled = lines[d].filter((l) => l.loss_scale !== undefined);
  report[d] = {
    val_loss: val,
    val_loss_relative_gap: valGap,
    final_loss: mine.get(steps),
    worst_logged_step: worst,
    s_per_step_median: median(lines[d].filter((l) => l["it/s"]).map((l) => 1 / l["it/s"])),
    ...(d === "f16" ? { skipped_steps: lines[d].filter((l) => l.skipped).map((l) => l.step), final_loss_scale: scaled.at(-1)?.loss_scale } : {}),
    within_tolerance: worst.relative_gap <= TOLERANCE && valGap <= TOLERANCE,
  };
  report[d].losses = Object.fromEntries([...mine].filter(([s]) => s >= FROM_STEP));
}
report.f32.losses = Object.fromEntries([...reference].filter(([s]) => s >= FROM_STEP));
report.output_dir = out;
console.log(JSON.stringify(report, null, 2));
