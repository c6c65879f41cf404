import { existsSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// The hybrid pattern at toy size (Oxidizr's keys): Mamba2 mixers in layers 0 and 1, latent
// attention in layer 2, experts in every MLP; trained, resumed, sampled and estimated from the CLI.
const HYBRID_MODEL = {
  arch: "llama",
  vocab_size: 256,
  hidden_size: 32,
  num_layers: 3,
  num_heads: 4,
  max_seq_len: 16,
  intermediate_size: 24,
  kv_latent_dim: 12,
  d_rope: 4,
  num_experts: 3,
  experts_per_tok: 2,
  mamba_layers: [0, 1],
  mamba2_head_dim: 16,
  mamba2_state_size: 8,
  mamba2_chunk_size: 6,
  mamba2_n_groups: 2,
};

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("mamba2");
  await ws.writeConfig("hybrid.yaml", { model: HYBRID_MODEL, trainer: { max_steps: 40, learning_rate: 0.01, save_interval: 20 } });
  await ws.writeTokens("data.bin", textTokens(4000));
});
afterEach(() => ws.remove());

describe("Mamba2 layers from the CLI", () => {
  it("trains a Mamba2 + latent attention + experts model with the loss falling, resumes bit-exactly, samples, estimates, and refuses a Hugging Face export", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "hybrid.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "kiln train");
    expect(r.stderr).toMatch(/llama, [\d.,K]+ parameters, 3 layers, hidden 32, Mamba2 in 2 of 3 layers \(4 heads of 16, state 8, chunks of 6\), latent attention \(kv 12, rope 4\), 3 experts \(top 2\)/);
    const steps = jsonLines(r.stdout).filter((l) => typeof l.loss === "number" && typeof l.grad_norm === "number");
    expect(steps).toHaveLength(40);
    const first = steps.slice(0, 5).reduce((s, l) => s + (l.loss as number), 0) / 5;
    const last = steps.slice(-5).reduce((s, l) => s + (l.loss as number), 0) / 5;
    expect(last).toBeLessThan(first - 1);

    const resumed = expectSuccess(await ws.run(["train", "-f", "hybrid.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--resume", "out/step_20.safetensors"]), "resume");
    const again = jsonLines(resumed.stdout).filter((l) => typeof l.loss === "number" && typeof l.grad_norm === "number");
    expect(again.map((l) => l.loss)).toEqual(steps.slice(20).map((l) => l.loss));

    const sample = await ws.run(["sample", "--checkpoint", "out/step_40.safetensors", "--prompt", "Once", "--tokenizer", "bytes", "--max-tokens", "12", "--temperature", "0"]);
    expect(sample.code, sample.stderr).toBe(0);
    expect(sample.stdout.startsWith("Once")).toBe(true);

    const estimate = expectSuccess(await ws.run(["estimate", "-f", "hybrid.yaml"]), "kiln estimate");
    expect(estimate.stdout).toMatch(/active per token/);

    const exported = await ws.run(["export", "--checkpoint", "out/step_40.safetensors", "--out", "hf"]);
    expect(exported.code).not.toBe(0);
    expect(exported.stderr).toMatch(/which kiln cannot export to a Hugging Face folder yet/);
    expect(existsSync(ws.path("hf"))).toBe(false);
  });
});
