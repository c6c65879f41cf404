// Mamba3 against Mamba2 and attention, on the wasm backend.
//  1. Layer cost: a 4-layer Llama whose mixers are all Mamba3 (SISO with complex RoPE, and MIMO
//     rank 4), all Mamba2, or all attention, at seq 256 (batch 8) and seq 1024 (batch 2): as
//     many tokens per step each way. Mamba layers at Oxidizr's nano proportions (heads of 16,
//     state 64, chunks of 64). Runs alternate; median of --steps steps from a cold start (the
//     first step included) in each of --rounds rounds; printed as step-time ratios over Mamba2
//     and over attention.
//  2. Learning: a reduced nano-mamba3-hybrid (Mamba3 mixers in 3 of 4 layers, latent attention
//     in the 4th, experts in every MLP) against the same model with Mamba2 mixers, each trained
//     --train-steps steps with `kiln train` on the built-in corpus (bytes): the mean loss of the
//     last 20 logged steps and their ratio (within 10% is the bar); and the Mamba3 hybrid with
//     the convolution (mamba3_use_conv), which Oxidizr's nano_mamba3_hybrid leaves out.
// Prints one JSON object. Needs the workspace built (pnpm turbo run build).
// Usage: node tooling/bench/mamba3-vs-mamba2.mjs [--steps 5] [--rounds 3] [--train-steps 300] [--threads 2]
import { layerAndLearningFlags, median, reducedNanoHybrid, paramsOf, stepTimes, tailLoss, trainLines } from "./lib/train-runs.mjs";

const { steps, rounds, trainSteps, threads } = layerAndLearningFlags();

// Inner width 2 x 256 = 32 heads of 16 (Oxidizr's head size), state 64, chunks of 64.
const SIZES = { mamba2_num_heads: 32, mamba2_head_dim: 16, mamba2_state_size: 64, mamba2_chunk_size: 64, mamba2_n_groups: 1, mamba2_conv_kernel: 4, mamba2_expand: 2 };
const MAMBA3 = { mamba3_enabled: true, mamba3_complex_rope: true, mamba3_use_conv: false };
const LAYERS = { arch: "llama", vocab_size: 256, hidden_size: 256, num_layers: 4, num_heads: 4, kv_heads: 4, max_seq_len: 1024, intermediate_size: 512 };
const ALL = [0, 1, 2, 3];
const LAYER_MODELS = {
  attention: LAYERS,
  mamba2: { ...LAYERS, mamba_layers: ALL, ...SIZES },
  mamba3_siso: { ...LAYERS, mamba_layers: ALL, ...SIZES, ...MAMBA3, mamba3_mimo_rank: 0 },
  mamba3_mimo4: { ...LAYERS, mamba_layers: ALL, ...SIZES, ...MAMBA3, mamba3_mimo_rank: 4 },
};
const NAMES = Object.keys(LAYER_MODELS);
const SHAPES = [
  { seqLen: 256, batchSize: 8 },
  { seqLen: 1024, batchSize: 2 },
];

const layerCost = {};
for (const shape of SHAPES) {
  const times = Object.fromEntries(NAMES.map((n) => [n, []]));
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? NAMES : [...NAMES].reverse();
    for (const name of order) times[name].push(...(await stepTimes(LAYER_MODELS[name], { ...shape, steps, threads })));
  }
  const med = Object.fromEntries(NAMES.map((n) => [n, median(times[n])]));
  layerCost[`seq_${shape.seqLen}`] = {
    batch: shape.batchSize,
    step_ms_median: med,
    step_ms_best: Object.fromEntries(NAMES.map((n) => [n, Math.min(...times[n])])),
    over_mamba2_step_time: Object.fromEntries(NAMES.filter((n) => n !== "mamba2").map((n) => [n, med[n] / med.mamba2])),
    over_attention_step_time: Object.fromEntries(NAMES.filter((n) => n !== "attention").map((n) => [n, med[n] / med.attention])),
    steps_timed_each: times.attention.length,
  };
}

// The reduced nano-hybrid of hybrid-vs-dense.mjs, its Mamba layers Mamba3 or Mamba2.
const HYBRID_MAMBA2 = reducedNanoHybrid(16, 16);
const HYBRID_MAMBA3 = { ...HYBRID_MAMBA2, ...MAMBA3, mamba3_mimo_rank: 0 };
// The same with Mamba2's 4-tap convolution on x, B and C (mamba3_use_conv), which Oxidizr's hybrid leaves out.
const HYBRID_MAMBA3_CONV = { ...HYBRID_MAMBA3, mamba3_use_conv: true };

function trainRun(name, model) {
  const trainer = { learning_rate: 3e-3, min_learning_rate: 3e-4, warmup_steps: 30, batch_size: 8, seq_len: 128, max_steps: trainSteps, log_interval: 1, eval_interval: trainSteps, eval_iters: 2, save_interval: trainSteps, seed: 1337, load_balance_alpha: 0.01 };
  return { final_loss: tailLoss(trainLines(name, model, trainer, threads)) };
}

const learned =
  trainSteps > 0
    ? { mamba2_hybrid: trainRun("mamba2-hybrid", HYBRID_MAMBA2), mamba3_hybrid: trainRun("mamba3-hybrid", HYBRID_MAMBA3), mamba3_conv_hybrid: trainRun("mamba3-conv-hybrid", HYBRID_MAMBA3_CONV) }
    : undefined;
console.log(
  JSON.stringify({
    backend: `wasm x ${threads} threads`,
    layer_cost: { params: Object.fromEntries(NAMES.map((n) => [n, paramsOf(LAYER_MODELS[n])])), ...layerCost },
    learning: {
      params: { mamba2_hybrid: paramsOf(HYBRID_MAMBA2), mamba3_hybrid: paramsOf(HYBRID_MAMBA3) },
      ...(learned
        ? {
            train_steps: trainSteps,
            learned,
            mamba3_over_mamba2_final_loss: learned.mamba3_hybrid.final_loss / learned.mamba2_hybrid.final_loss,
            mamba3_conv_over_mamba2_final_loss: learned.mamba3_conv_hybrid.final_loss / learned.mamba2_hybrid.final_loss,
          }
        : {}),
    },
  }),
);
process.exit(0);
