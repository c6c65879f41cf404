// Mixture of experts against a dense Llama with as many active parameters, on the wasm backend.
//  1. Step time: both models trained on the same random batch, runs alternating, median of
//     --steps steps from a cold start (the first step included) in each of --rounds rounds.
//  2. Learning: `kiln train` on the built-in corpus (bytes) for --train-steps steps each; the
//     mean loss of the last 20 logged steps, and the MoE run's largest expert_imbalance.
// Prints one JSON object. Needs the workspace built (pnpm turbo run build).
// Usage: node tooling/bench/moe-vs-dense.mjs [--steps 10] [--rounds 3] [--train-steps 300] [--threads 2]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Trainer, archOf, paramLayout, resolveModelConfig } from "../../packages/core/dist/index.js";
import { createWasmBackend } from "../../packages/kernels-wasm/dist/index.js";

const { values } = parseArgs({ options: Object.fromEntries(["steps", "rounds", "train-steps", "threads"].map((k) => [k, { type: "string" }])) });
const steps = Number(values.steps ?? 10);
const rounds = Number(values.rounds ?? 3);
const trainSteps = Number(values["train-steps"] ?? 300);
const threads = Number(values.threads ?? 2);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

// Equal active MLP parameters per layer: dense 3 x 128 x 384; MoE 2 routed + 1 shared expert of 3 x 128 x 128.
const COMMON = { arch: "llama", vocab_size: 256, hidden_size: 128, num_layers: 4, num_heads: 4, kv_heads: 2, max_seq_len: 128 };
const MODELS = {
  dense: { ...COMMON, intermediate_size: 384 },
  moe: { ...COMMON, intermediate_size: 128, num_experts: 4, experts_per_tok: 2, shared_expert_enabled: true },
};
const configOf = (m) =>
  resolveModelConfig({
    arch: m.arch,
    vocabSize: m.vocab_size,
    hiddenSize: m.hidden_size,
    numLayers: m.num_layers,
    numHeads: m.num_heads,
    kvHeads: m.kv_heads,
    maxSeqLen: m.max_seq_len,
    intermediateSize: m.intermediate_size,
    ...(m.num_experts ? { numExperts: m.num_experts, expertsPerToken: m.experts_per_tok, sharedExpert: m.shared_expert_enabled } : {}),
  });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function stepTimes(model, batchSize = 8, seqLen = 128) {
  const backend = await createWasmBackend({ threads });
  const trainer = new Trainer(backend, {
    model,
    batchSize,
    seqLen,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
    schedule: { kind: "constant", peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 1 },
    seed: 0,
  });
  let s = 1;
  const rand = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) % model.vocabSize);
  const batch = { ids: Int32Array.from({ length: batchSize * seqLen }, rand), targets: Int32Array.from({ length: batchSize * seqLen }, rand) };
  const ms = [];
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    await trainer.step([batch]);
    ms.push(performance.now() - t0);
  }
  trainer.dispose();
  backend.dispose();
  return ms;
}

const times = { dense: [], moe: [] };
for (let r = 0; r < rounds; r++) for (const name of r % 2 === 0 ? ["dense", "moe"] : ["moe", "dense"]) times[name].push(...(await stepTimes(configOf(MODELS[name]))));

function trainRun(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-moe-bench-${name}-`));
  const yaml = path.join(dir, `${name}.yaml`);
  const m = MODELS[name];
  const trainer = { learning_rate: 3e-3, min_learning_rate: 3e-4, warmup_steps: 30, batch_size: 8, seq_len: 128, max_steps: trainSteps, log_interval: 1, eval_interval: trainSteps, eval_iters: 2, save_interval: trainSteps, seed: 1337 };
  const toYaml = (o) => Object.entries(o).map(([k, v]) => `  ${k}: ${v}`).join("\n");
  fs.writeFileSync(yaml, `model:\n${toYaml(m)}\ntrainer:\n${toYaml(trainer)}\ndata:\n  tokenizer: bytes\n`);
  const out = execFileSync(process.execPath, [path.join(repo, "packages/cli/dist/bin/kiln.js"), "train", "-f", yaml, "--headless", "--output-dir", path.join(dir, "out"), "--threads", String(threads)], { encoding: "utf8", maxBuffer: 1 << 28 });
  const lines = out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((l) => typeof l.grad_norm === "number");
  fs.rmSync(dir, { recursive: true, force: true });
  const tail = lines.slice(-20);
  return {
    final_loss: tail.reduce((s, l) => s + l.loss, 0) / tail.length,
    ...(name === "moe" ? { max_expert_imbalance: Math.max(...lines.map((l) => l.expert_imbalance)), max_expert_imbalance_last_100: Math.max(...lines.slice(-100).map((l) => l.expert_imbalance)) } : {}),
  };
}

const learned = trainSteps > 0 ? { dense: trainRun("dense"), moe: trainRun("moe") } : undefined;
const params = (name) => {
  const c = configOf(MODELS[name]);
  const total = paramLayout(c).count;
  return { total, active: total - archOf(c).inactiveParams(c) };
};
console.log(
  JSON.stringify({
    backend: `wasm x ${threads} threads`,
    params: { dense: params("dense"), moe: params("moe") },
    step_ms_median: { dense: median(times.dense), moe: median(times.moe) },
    step_ms_best: { dense: Math.min(...times.dense), moe: Math.min(...times.moe) },
    moe_over_dense_step_time: median(times.moe) / median(times.dense),
    steps_timed_each: times.dense.length,
    ...(learned ? { train_steps: trainSteps, learned, moe_over_dense_final_loss: learned.moe.final_loss / learned.dense.final_loss } : {}),
  }),
);
process.exit(0);
