import { existsSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A Llama whose MLPs are mixtures of experts, trained, sampled and estimated from the CLI.
const MOE_MODEL = {
  arch: "llama",
  vocab_size: 256,
  hidden_size: 32,
  num_layers: 2,
  num_heads: 4,
  kv_heads: 2,
  max_seq_len: 16,
  intermediate_size: 24,
  num_experts: 4,
  experts_per_tok: 2,
  shared_expert_enabled: true,
};

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("moe");
  await ws.writeConfig("moe.yaml", { model: MOE_MODEL, trainer: { max_steps: 40, learning_rate: 0.01, save_interval: 40, load_balance_alpha: 0.01 } });
  await ws.writeTokens("data.bin", textTokens(4000));
});
afterEach(() => ws.remove());

describe("mixture-of-experts training from the CLI", () => {
  it("trains with the load-balancing loss logged apart, then samples from the checkpoint", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "moe.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "kiln train");
    expect(r.stderr).toMatch(/4 experts \(top 2, shared expert\)/);
    const steps = jsonLines(r.stdout).filter((l) => typeof l.loss === "number" && typeof l.grad_norm === "number");
    expect(steps).toHaveLength(40);
    for (const l of steps) expect(l.aux_loss, `step ${l.step}`).toBeGreaterThan(0);
    // alpha * E * sum_e f_e P_e is alpha when routing is uniform, and at most alpha * E.
    for (const l of steps) expect(l.aux_loss as number).toBeLessThan(0.01 * 4);
    // The busiest expert's share over an even one: 1 (even) to E/k = 2 (every token picks the same two).
    for (const l of steps) expect(l.expert_imbalance as number).toBeGreaterThanOrEqual(1);
    for (const l of steps) expect(l.expert_imbalance as number).toBeLessThanOrEqual(2);
    const first = steps.slice(0, 5).reduce((s, l) => s + (l.loss as number), 0) / 5;
    const last = steps.slice(-5).reduce((s, l) => s + (l.loss as number), 0) / 5;
    expect(last).toBeLessThan(first - 1);

    const sample = await ws.run(["sample", "--checkpoint", "out/step_40.safetensors", "--prompt", "Once", "--tokenizer", "bytes", "--max-tokens", "12", "--temperature", "0"]);
    expect(sample.code, sample.stderr).toBe(0);
    expect(sample.stdout.startsWith("Once")).toBe(true);

    const exported = await ws.run(["export", "--checkpoint", "out/step_40.safetensors", "--out", "hf"]);
    expect(exported.code).not.toBe(0);
    expect(exported.stderr).toMatch(/mixture-of-experts model, which kiln cannot export to a Hugging Face folder yet/);
    expect(existsSync(ws.path("hf"))).toBe(false);
  });

  it("kiln estimate counts total and active parameters", async () => {
    const r = expectSuccess(await ws.run(["estimate", "-f", "moe.yaml"]), "kiln estimate");
    // Per layer 3 of 5 SwiGLU experts (2 routed of 4, and the shared one) act on a token: 2 idle x 3 x 24 x 32.
    const total = Number(/\((\d+)\)/.exec(r.stdout)![1]);
    const active = JSON.parse((await ws.run(["estimate", "-f", "moe.yaml", "--json"])).stdout).activeParameters as number;
    expect(total - active).toBe(2 * 2 * 3 * 24 * 32);
    expect(r.stdout).toMatch(/active per token/);
  });
});
