import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// The open model families trained from scratch by their YAML arch (sliding windows shorter
// than the sequence), exported as their transformers class, and read back by kiln eval.
const BASE = { vocab_size: 256, hidden_size: 32, num_layers: 3, num_heads: 4, kv_heads: 2, max_seq_len: 32, intermediate_size: 48 };
const MODELS: [string, Record<string, unknown>, RegExp, Record<string, unknown>][] = [
  ["qwen3", { ...BASE, arch: "qwen3", head_dim: 12, sliding_window: 8, layer_types: ["sliding_attention", "full_attention", "sliding_attention"] }, /sliding window 8 in 2 of 3 layers/, { architectures: ["Qwen3ForCausalLM"], head_dim: 12, use_sliding_window: true, sliding_window: 8, max_window_layers: 0 }],
  ["mistral", { ...BASE, arch: "mistral", sliding_window: 8 }, /sliding window 8 in every layer/, { architectures: ["MistralForCausalLM"], sliding_window: 8 }],
  [
    "gemma3",
    { ...BASE, arch: "gemma3", head_dim: 16, sliding_window: 8, layer_types: ["sliding_attention", "sliding_attention", "full_attention"], query_pre_attn_scalar: 16, rope_local_base_freq: 100 },
    /sliding window 8 in 2 of 3 layers/,
    { architectures: ["Gemma3ForCausalLM"], model_type: "gemma3_text", query_pre_attn_scalar: 16, rope_local_base_freq: 100, sliding_window_pattern: 3, tie_word_embeddings: true },
  ],
];

describe.each(MODELS)("arch %s from YAML", (arch, model, banner, config) => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await Workspace.create(`arch-${arch}`);
    await ws.writeConfig("model.yaml", { model, trainer: { max_steps: 30, learning_rate: 0.01, seq_len: 32, batch_size: 4, eval_interval: 1000 } });
    await ws.writeTokens("data.bin", textTokens(6000));
  });
  afterAll(() => ws.remove());

  it("trains with the loss falling, exports its transformers class, and kiln eval reads the export", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "model.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "kiln train");
    expect(r.stderr).toMatch(new RegExp(`${arch}, [\\d.,K]+ parameters, 3 layers, hidden 32`));
    expect(r.stderr).toMatch(banner);
    const steps = jsonLines(r.stdout).filter((l) => typeof l.loss === "number" && typeof l.grad_norm === "number");
    expect(steps).toHaveLength(30);
    const mean = (xs: Record<string, unknown>[]) => xs.reduce((s, l) => s + (l.loss as number), 0) / xs.length;
    expect(mean(steps.slice(-5))).toBeLessThan(mean(steps.slice(0, 5)) - 0.5);
    expectSuccess(await ws.run(["export", "--checkpoint", "out/final.safetensors", "--out", "hf"]), "kiln export");
    expect(JSON.parse(await readFile(ws.path("hf", "config.json"), "utf8"))).toMatchObject(config);
    const fromCheckpoint = expectSuccess(await ws.run(["eval", "--checkpoint", "out/final.safetensors", "-d", "data.bin", "--seq-len", "32", "--max-windows", "8", "--json"]), "kiln eval");
    const fromFolder = expectSuccess(await ws.run(["eval", "--checkpoint", "hf", "-d", "data.bin", "--seq-len", "32", "--max-windows", "8", "--json"]), "kiln eval");
    expect(JSON.parse(fromFolder.stdout).loss).toBeCloseTo(JSON.parse(fromCheckpoint.stdout).loss, 10);
  });
});
