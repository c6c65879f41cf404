import { existsSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A Llama with multi-head latent attention (Oxidizr's keys), trained, resumed, sampled and estimated from the CLI.
const MLA_MODEL = {
  arch: "llama",
  vocab_size: 256,
  hidden_size: 32,
  num_layers: 2,
  num_heads: 4,
  max_seq_len: 16,
  intermediate_size: 48,
  kv_latent_dim: 12,
  q_latent_dim: 20,
  d_rope: 4,
};

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("mla");
  await ws.writeConfig("mla.yaml", { model: MLA_MODEL, trainer: { max_steps: 40, learning_rate: 0.01, save_interval: 20 } });
  await ws.writeTokens("data.bin", textTokens(4000));
});
afterEach(() => ws.remove());

describe("multi-head latent attention from the CLI", () => {
  it("trains with the loss falling, resumes bit-exactly, samples, and refuses a Hugging Face export", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "mla.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "kiln train");
    expect(r.stderr).toMatch(/llama, [\d.,K]+ parameters, 2 layers, hidden 32, latent attention \(kv 12, q 20, rope 4\)/);
    const steps = jsonLines(r.stdout).filter((l) => typeof l.loss === "number" && typeof l.grad_norm === "number");
    expect(steps).toHaveLength(40);
    const first = steps.slice(0, 5).reduce((s, l) => s + (l.loss as number), 0) / 5;
    const last = steps.slice(-5).reduce((s, l) => s + (l.loss as number), 0) / 5;
    expect(last).toBeLessThan(first - 1);

    const resumed = expectSuccess(await ws.run(["train", "-f", "mla.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--resume", "out/step_20.safetensors"]), "resume");
    const again = jsonLines(resumed.stdout).filter((l) => typeof l.loss === "number" && typeof l.grad_norm === "number");
    expect(again.map((l) => l.loss)).toEqual(steps.slice(20).map((l) => l.loss));

    const sample = await ws.run(["sample", "--checkpoint", "out/step_40.safetensors", "--prompt", "Once", "--tokenizer", "bytes", "--max-tokens", "12", "--temperature", "0"]);
    expect(sample.code, sample.stderr).toBe(0);
    expect(sample.stdout.startsWith("Once")).toBe(true);

    const exported = await ws.run(["export", "--checkpoint", "out/step_40.safetensors", "--out", "hf"]);
    expect(exported.code).not.toBe(0);
    expect(exported.stderr).toMatch(/a model with multi-head latent attention, which kiln cannot export to a Hugging Face folder yet/);
    expect(existsSync(ws.path("hf"))).toBe(false);
  });
});
