// Shared by the architecture benchmarks: models given with their YAML keys, timed training
// steps on the wasm backend, and `kiln train` runs on the built-in corpus.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { MODEL_YAML_KEYS, Trainer, archOf, paramLayout, resolveModelConfig } from "../../../packages/core/dist/index.js";
import { createWasmBackend } from "../../../packages/kernels-wasm/dist/index.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** A ModelConfig from a YAML model section's keys. */
export const configOf = (yamlModel) => resolveModelConfig(Object.fromEntries(Object.entries(yamlModel).map(([k, v]) => [MODEL_YAML_KEYS[k], v])));

/** Total parameters and those a token's forward pass multiplies (experts it is not routed to left out). */
export function paramsOf(yamlModel) {
  const c = configOf(yamlModel);
  const total = paramLayout(c).count;
  return { total, active: total - archOf(c).inactiveParams(c) };
}

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Milliseconds of each of `steps` training steps from a cold start (the first included) on one random batch. */
export async function stepTimes(yamlModel, { batchSize, seqLen, steps, threads }) {
  const model = configOf(yamlModel);
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

/** `kiln train` on the built-in corpus (byte tokens); returns every logged training line. */
export function trainLines(name, yamlModel, trainer, threads) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-bench-${name}-`));
  const yaml = path.join(dir, `${name}.yaml`);
  const toYaml = (o) => Object.entries(o).map(([k, v]) => `  ${k}: ${Array.isArray(v) ? `[${v.join(", ")}]` : v}`).join("\n");
  fs.writeFileSync(yaml, `model:\n${toYaml(yamlModel)}\ntrainer:\n${toYaml(trainer)}\ndata:\n  tokenizer: bytes\n`);
  try {
    const out = execFileSync(process.execPath, [path.join(repo, "packages/cli/dist/bin/kiln.js"), "train", "-f", yaml, "--headless", "--output-dir", path.join(dir, "out"), "--threads", String(threads)], { encoding: "utf8", maxBuffer: 1 << 28 });
    return out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((l) => typeof l.grad_norm === "number");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Mean loss of the last `n` logged steps. */
export const tailLoss = (lines, n = 20) => lines.slice(-n).reduce((s, l) => s + l.loss, 0) / Math.min(n, lines.length);

/** The flags of the layer-cost and learning benchmarks: --steps 5 --rounds 3 --train-steps 300 --threads 2 by default. */
export function layerAndLearningFlags() {
  const { values } = parseArgs({ options: Object.fromEntries(["steps", "rounds", "train-steps", "threads"].map((k) => [k, { type: "string" }])) });
  return { steps: Number(values.steps ?? 5), rounds: Number(values.rounds ?? 3), trainSteps: Number(values["train-steps"] ?? 300), threads: Number(values.threads ?? 2) };
}

/**
 * The reduced nano-hybrid both architecture benchmarks train: hidden 128, Mamba2 mixers in
 * layers 0-2 (state 32, chunks of 64, a 4-tap conv), latent attention in layer 3, 4 experts
 * (top 2, shared) in every MLP; `heads` Mamba heads of `headDim` (their product 256).
 */
export function reducedNanoHybrid(heads, headDim) {
  return {
    arch: "llama",
    vocab_size: 256,
    hidden_size: 128,
    num_layers: 4,
    num_heads: 4,
    max_seq_len: 128,
    intermediate_size: 128,
    kv_latent_dim: 32,
    q_latent_dim: 64,
    d_rope: 8,
    num_experts: 4,
    experts_per_tok: 2,
    shared_expert_enabled: true,
    mamba_layers: [0, 1, 2],
    mamba2_num_heads: heads,
    mamba2_head_dim: headDim,
    mamba2_state_size: 32,
    mamba2_chunk_size: 64,
    mamba2_n_groups: 1,
    mamba2_conv_kernel: 4,
    mamba2_expand: 2,
  };
}
