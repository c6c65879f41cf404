// Mixture of experts against a dense Llama with as many active parameters, on the wasm backend.
//  1. Step time: both models trained on the same random batch, runs alternating, median of
//     --steps steps from a cold start (the first step included) in each of --rounds rounds.
//  2. Learning: `kiln train` on the built-in corpus (bytes) for --train-steps steps each; the
//     mean loss of the last 20 logged steps, and the MoE run's largest expert_imbalance.
// Prints one JSON object. Needs the workspace built (pnpm turbo run build).
// Usage: node tooling/bench/moe-vs-dense.mjs [--steps 10] [--rounds 3] [--train-steps 300] [--threads 2]
import { parseArgs } from "node:util";
import { median, paramsOf, stepTimes, tailLoss, trainLines } from "./lib/train-runs.mjs";

const { values } = parseArgs({ options: Object.fromEntries(["steps", "rounds", "train-steps", "threads"].map((k) => [k, { type: "string" }])) });
const steps = Number(values.steps ?? 10);
const rounds = Number(values.rounds ?? 3);
const trainSteps = Number(values["train-steps"] ?? 300);
const threads = Number(values.threads ?? 2);

// Equal active MLP parameters per layer: dense 3 x 128 x 384; MoE 2 routed + 1 shared expert of 3 x 128 x 128.
const COMMON = { arch: "llama", vocab_size: 256, hidden_size: 128, num_layers: 4, num_heads: 4, kv_heads: 2, max_seq_len: 128 };
const MODELS = {
  dense: { ...COMMON, intermediate_size: 384 },
  moe: { ...COMMON, intermediate_size: 128, num_experts: 4, experts_per_tok: 2, shared_expert_enabled: true },
};

const times = { dense: [], moe: [] };
for (let r = 0; r < rounds; r++) for (const name of r % 2 === 0 ? ["dense", "moe"] : ["moe", "dense"]) times[name].push(...(await stepTimes(MODELS[name], { batchSize: 8, seqLen: 128, steps, threads })));

function trainRun(name) {
  const trainer = { learning_rate: 3e-3, min_learning_rate: 3e-4, warmup_steps: 30, batch_size: 8, seq_len: 128, max_steps: trainSteps, log_interval: 1, eval_interval: trainSteps, eval_iters: 2, save_interval: trainSteps, seed: 1337 };
  const lines = trainLines(name, MODELS[name], trainer, threads);
  return {
    final_loss: tailLoss(lines),
    ...(name === "moe" ? { max_expert_imbalance: Math.max(...lines.map((l) => l.expert_imbalance)), max_expert_imbalance_last_100: Math.max(...lines.slice(-100).map((l) => l.expert_imbalance)) } : {}),
  };
}

const learned = trainSteps > 0 ? { dense: trainRun("dense"), moe: trainRun("moe") } : undefined;
console.log(
  JSON.stringify({
    backend: `wasm x ${threads} threads`,
    params: { dense: paramsOf(MODELS.dense), moe: paramsOf(MODELS.moe) },
    step_ms_median: { dense: median(times.dense), moe: median(times.moe) },
    step_ms_best: { dense: Math.min(...times.dense), moe: Math.min(...times.moe) },
    moe_over_dense_step_time: median(times.moe) / median(times.dense),
    steps_timed_each: times.dense.length,
    ...(learned ? { train_steps: trainSteps, learned, moe_over_dense_final_loss: learned.moe.final_loss / learned.dense.final_loss } : {}),
  }),
);
process.exit(0);
