// Mamba2 and the hybrid pattern against attention and a dense Llama, on the wasm backend.
//  1. Layer cost: a 4-layer Llama whose mixers are all Mamba2 against the same model with
//     attention in every layer, at seq 256 (batch 8) and seq 1024 (batch 2): as many tokens per
//     step either way. Runs alternate; median of --steps steps from a cold start (the first step
//     included) in each of --rounds rounds; printed as Mamba2 / attention step-time ratios.
//  2. Learning: a reduced nano-hybrid (Mamba2 mixers in 3 of 4 layers, latent attention in the
//     4th, experts in every MLP, load_balance_alpha 0.01) against a dense Llama with as many
//     active parameters per token, each trained --train-steps steps with `kiln train` on the
//     built-in corpus (bytes): the mean loss of the last 20 logged steps, their ratio (within
//     10% is the bar), and the hybrid's largest expert_imbalance (busiest expert over an even share).
// Prints one JSON object. Needs the workspace built (pnpm turbo run build).
// Usage: node tooling/bench/hybrid-vs-dense.mjs [--steps 5] [--rounds 3] [--train-steps 300] [--threads 2]
import { layerAndLearningFlags, median, reducedNanoHybrid, paramsOf, stepTimes, tailLoss, trainLines } from "./lib/train-runs.mjs";

const { steps, rounds, trainSteps, threads } = layerAndLearningFlags();

// Mamba2 as nano configures it, at hidden 256: inner 512 = 8 heads of 64, state 64, chunks of 64.
const MAMBA2 = { mamba2_num_heads: 8, mamba2_head_dim: 64, mamba2_state_size: 64, mamba2_chunk_size: 64, mamba2_n_groups: 1, mamba2_conv_kernel: 4, mamba2_expand: 2 };
const LAYERS = { arch: "llama", vocab_size: 256, hidden_size: 256, num_layers: 4, num_heads: 4, kv_heads: 4, max_seq_len: 1024, intermediate_size: 512 };
const LAYER_MODELS = { attention: LAYERS, mamba2: { ...LAYERS, mamba_layers: [0, 1, 2, 3], ...MAMBA2 } };
const SHAPES = [
  { seqLen: 256, batchSize: 8 },
  { seqLen: 1024, batchSize: 2 },
];

const layerCost = {};
for (const shape of SHAPES) {
  const times = { attention: [], mamba2: [] };
  for (let r = 0; r < rounds; r++) for (const name of r % 2 === 0 ? ["attention", "mamba2"] : ["mamba2", "attention"]) times[name].push(...(await stepTimes(LAYER_MODELS[name], { ...shape, steps, threads })));
  layerCost[`seq_${shape.seqLen}`] = {
    batch: shape.batchSize,
    step_ms_median: { attention: median(times.attention), mamba2: median(times.mamba2) },
    step_ms_best: { attention: Math.min(...times.attention), mamba2: Math.min(...times.mamba2) },
    mamba2_over_attention_step_time: median(times.mamba2) / median(times.attention),
    steps_timed_each: times.attention.length,
  };
}

// The reduced nano-hybrid, and the dense intermediate size that gives it as many active parameters.
const COMMON = { arch: "llama", vocab_size: 256, hidden_size: 128, num_layers: 4, num_heads: 4, max_seq_len: 128 };
const HYBRID = reducedNanoHybrid(4, 64);
const denseOf = (intermediate) => ({ ...COMMON, kv_heads: 2, intermediate_size: intermediate });
const target = paramsOf(HYBRID).active;
let intermediate = 8;
while (paramsOf(denseOf(intermediate + 8)).active <= target) intermediate += 8;
const DENSE = denseOf(intermediate);

function trainRun(name, model) {
  const trainer = { learning_rate: 3e-3, min_learning_rate: 3e-4, warmup_steps: 30, batch_size: 8, seq_len: 128, max_steps: trainSteps, log_interval: 1, eval_interval: trainSteps, eval_iters: 2, save_interval: trainSteps, seed: 1337, ...(model.num_experts ? { load_balance_alpha: 0.01 } : {}) };
  const lines = trainLines(name, model, trainer, threads);
  return { final_loss: tailLoss(lines), ...(model.num_experts ? { max_expert_imbalance: Math.max(...lines.map((l) => l.expert_imbalance)), max_expert_imbalance_last_100: Math.max(...lines.slice(-100).map((l) => l.expert_imbalance)) } : {}) };
}

const learned = trainSteps > 0 ? { dense: trainRun("dense", DENSE), hybrid: trainRun("hybrid", HYBRID) } : undefined;
console.log(
  JSON.stringify({
    backend: `wasm x ${threads} threads`,
    layer_cost: { params: { attention: paramsOf(LAYER_MODELS.attention), mamba2: paramsOf(LAYER_MODELS.mamba2) }, ...layerCost },
    learning: {
      params: { dense: paramsOf(DENSE), hybrid: paramsOf(HYBRID) },
      dense_intermediate_size: intermediate,
      ...(learned ? { train_steps: trainSteps, learned, hybrid_over_dense_final_loss: learned.hybrid.final_loss / learned.dense.final_loss } : {}),
    },
  }),
);
process.exit(0);
