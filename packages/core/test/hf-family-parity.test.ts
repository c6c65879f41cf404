import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { type Backend, createReferenceBackend } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { readSafetensors } from "../src/checkpoint/safetensors-file.js";
import { PretrainedWeights } from "../src/hf/pretrained-weights.js";
import { Trainer } from "../src/train/trainer.js";
import { scaledError } from "./support/pytorch-fixture.js";

// Hugging Face folders of the families kiln fine-tunes, saved and run in float64 by
// transformers' own modeling code (tooling/fixtures/hf_family_fixtures.py): kiln loads each
// folder and computes the same logits (1e-5) and every gradient (1e-4) on every backend:
// Qwen2 (q/k/v biases; untied and tied), Llama 3.x's llama3 RoPE scaling, linear scaling,
// a head_dim apart from hidden_size / num_attention_heads, Llama's attention_bias and mlp_bias.

const here = path.dirname(fileURLToPath(import.meta.url));
/** Fixture folder and the architecture kiln reads it as. */
const FOLDERS: [string, string][] = [
  ["qwen2-tiny", "qwen2"],
  ["qwen2-tied-tiny", "qwen2"],
  ["llama3-tiny", "llama"],
  ["llama-linear-tiny", "llama"],
  ["llama-headdim-tiny", "llama"],
  ["llama-bias-tiny", "llama"],
  ["qwen3-tiny", "qwen3"],
  ["qwen3-window-tiny", "qwen3"],
  ["qwen2-window-tiny", "qwen2"],
  ["mistral-tiny", "mistral"],
  ["gemma3-tiny", "gemma3"],
];
const sim = cudaStatus().simulator;
const BACKENDS: [string, () => Backend | Promise<Backend>][] = [
  ["reference", () => createReferenceBackend()],
  ["wasm, 1 thread", () => createWasmBackend({ threads: 1, measurePeak: false })],
  ["wasm, 2 threads", () => createWasmBackend({ threads: 2, measurePeak: false })],
  ...(sim.built ? ([["cuda-sim", () => createCudaSimBackend()]] as [string, () => Backend][]) : []),
];

async function fixture(name: string) {
  const folder = path.join(here, "fixtures", "hf", name);
  const ref = await readSafetensors(path.join(folder, "reference.safetensors"));
  const tensor = (n: string) => {
    const t = ref.tensors.get(n);
    if (!t) throw new Error(`${name}: no ${n}`);
    return new Float32Array(t.data.slice().buffer);
  };
  const [B, T] = [Number(ref.metadata.batch), Number(ref.metadata.seq_len)];
  const sequence = tensor("sequence");
  const ids = new Int32Array(B * T), targets = new Int32Array(B * T);
  for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) [ids[b * T + t], targets[b * T + t]] = [sequence[b * T + t], sequence[b * T + t + 1]];
  return { folder, tensor, B, T, ids, targets };
}

describe.each(FOLDERS)("%s from transformers", (name, arch) => {
  it.each(BACKENDS)("%s: logits to 1e-5 and every gradient to 1e-4", async (_label, makeBackend) => {
    const f = await fixture(name);
    const weights = await PretrainedWeights.open(f.folder);
    expect(weights.model.arch).toBe(arch);
    const backend = await makeBackend();
    const trainer = new Trainer(backend, {
      model: weights.model,
      batchSize: f.B,
      seqLen: f.T,
      optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0, gradClip: 1 },
      schedule: { kind: "constant", peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 1 },
      seed: 0,
    });
    trainer.loadParameters(await weights.read());
    await weights.close();
    const runner = trainer.forwardRunner(f.B, f.T);
    const lossSum = await runner.run(f.ids, f.targets);
    expect(Math.abs(lossSum / (f.B * f.T) - f.tensor("loss")[0]) / f.tensor("loss")[0]).toBeLessThan(1e-5);
    expect(scaledError(await runner.logits(), f.tensor("logits"))).toBeLessThan(1e-5);
    runner.dispose();
    const loss = await trainer.lossAndGradients({ ids: f.ids, targets: f.targets });
    expect(Math.abs(loss - f.tensor("loss")[0]) / f.tensor("loss")[0]).toBeLessThan(1e-5);
    const grads = await trainer.readParameters("grads");
    expect(grads.size).toBeGreaterThan(0);
    for (const [n, g] of grads) expect(scaledError(g, f.tensor(`grad.${n}`)), n).toBeLessThan(1e-4);
    trainer.dispose();
    backend.dispose();
  });
});
