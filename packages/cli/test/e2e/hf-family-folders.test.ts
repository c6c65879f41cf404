import { spawnSync } from "node:child_process";
import { cp, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSafetensors } from "@kiln/core";
import { differingTensors, readCheckpoint } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// Folders transformers saved (packages/core/test/fixtures/hf/<name>, written by
// tooling/fixtures/hf_family_fixtures.py with the loss transformers computes beside it):
// kiln eval gives that loss and kiln sample transformers' greedy continuation; a run that
// makes no update exports the same tensors in the family's layout, with every key of the
// original config.json; a --bf16 fine-tune runs and its result evaluates and samples.
const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../core/test/fixtures/hf");
// transformers itself reads back what kiln exports after a fine-tune that moved the weights,
// with a Python that has torch and transformers: $KILN_HF_PYTHON (e.g. .venv-hf/bin/python,
// tooling/fixtures/make-hf-venv.sh makes it); without it that check is skipped, saying so.
const HF_PYTHON = process.env.KILN_HF_PYTHON;
const READBACK = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../tooling/fixtures/hf_readback.py");

/** Fixture folder, and what the exported config.json must say. */
const FAMILIES: [string, Record<string, unknown>][] = [
  ["qwen2-tiny", { architectures: ["Qwen2ForCausalLM"], model_type: "qwen2", num_key_value_heads: 2, tie_word_embeddings: false, use_sliding_window: false }],
  [
    "llama3-tiny",
    {
      architectures: ["LlamaForCausalLM"],
      model_type: "llama",
      num_key_value_heads: 2,
      tie_word_embeddings: true,
      rope_theta: 100,
      rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 },
    },
  ],
  [
    "qwen3-window-tiny",
    {
      architectures: ["Qwen3ForCausalLM"],
      model_type: "qwen3",
      head_dim: 16,
      num_key_value_heads: 1,
      tie_word_embeddings: true,
      use_sliding_window: true,
      sliding_window: 3,
      layer_types: ["sliding_attention", "full_attention", "sliding_attention"],
    },
  ],
  ["mistral-tiny", { architectures: ["MistralForCausalLM"], model_type: "mistral", sliding_window: 3, num_key_value_heads: 2, tie_word_embeddings: false }],
  [
    "gemma3-tiny",
    {
      architectures: ["Gemma3ForCausalLM"],
      model_type: "gemma3_text",
      head_dim: 16,
      query_pre_attn_scalar: 24,
      sliding_window: 3,
      sliding_window_pattern: 3,
      layer_types: ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
      rope_parameters: { full_attention: { rope_type: "linear", factor: 4, rope_theta: 1000 }, sliding_attention: { rope_type: "default", rope_theta: 10 } },
      tie_word_embeddings: true,
    },
  ],
];

/** Keys of config.json that say who wrote it, or transformers' private attributes (a leading _), not what the model is. */
const writerKey = (k: string) => k === "transformers_version" || k.startsWith("_");

describe.each(FAMILIES)("the %s folder from transformers", (name, exportedConfig) => {
  let ws: Workspace;
  let reference: { loss: number; sequence: Uint32Array; seqLen: number; prompt: string; greedyText: string };
  beforeAll(async () => {
    ws = await Workspace.create(name);
    await cp(path.join(FIXTURES, name), ws.path("model"), { recursive: true });
    const r = await openSafetensors(path.join(FIXTURES, name, "reference.safetensors"));
    const f32 = async (n: string) => new Float32Array((await r.read(n)).data.slice().buffer);
    reference = {
      loss: (await f32("loss"))[0],
      sequence: Uint32Array.from(await f32("sequence")),
      seqLen: Number(r.metadata.seq_len),
      prompt: String(r.metadata.prompt),
      greedyText: String(r.metadata.greedy_text),
    };
    await r.close();
    await ws.writeTokens("data.bin", reference.sequence);
    await ws.writeTokens("train.bin", Uint32Array.from({ length: 400 }, (_, i) => (i * 7 + 3) % 61));
  });
  afterAll(() => ws.remove());

  const evalLoss = async (checkpoint: string) => {
    const r = expectSuccess(await ws.run(["eval", "--checkpoint", checkpoint, "-d", "data.bin", "--seq-len", String(reference.seqLen), "--json"]), "kiln eval");
    return JSON.parse(r.stdout) as { loss: number; windows: number };
  };

  it("kiln eval gives the loss transformers computes, to 1e-5", async () => {
    const got = await evalLoss("model");
    expect(got.windows).toBe((reference.sequence.length - 1) / reference.seqLen);
    expect(Math.abs(got.loss - reference.loss) / reference.loss).toBeLessThan(1e-5);
  });

  const sample = async (checkpoint: string, extra: string[] = []) =>
    expectSuccess(await ws.run(["sample", "--checkpoint", checkpoint, "--prompt", reference.prompt, "--max-tokens", "6", "--temperature", "0", ...extra]), "kiln sample").stdout;

  it("kiln sample continues the prompt greedily as transformers' generate does", async () => {
    // The folder's tokenizer joins its words with spaces: prompt and continuation as transformers decodes them together.
    expect((await sample("model")).trim()).toBe(`${reference.prompt} ${reference.greedyText}`);
  });

  it("--init-from, a step at learning rate 1e-30, kiln export: the same tensors bit for bit, in the family's layout", async () => {
    await ws.write("still.yaml", "trainer: { batch_size: 1, seq_len: 7, max_steps: 1, learning_rate: 1.0e-30, lr_schedule: constant, warmup_steps: 0, weight_decay: 0, log_interval: 1, eval_interval: 1000, eval_iters: 1 }\n");
    expectSuccess(await ws.run(["train", "-f", "still.yaml", "--init-from", "model", "-d", "train.bin", "--output-dir", "still", "--headless"]), "kiln train");
    expectSuccess(await ws.run(["export", "--checkpoint", "still/final.safetensors", "--out", "exported"]), "kiln export");
    const config = JSON.parse(await readFile(ws.path("exported", "config.json"), "utf8")) as Record<string, unknown>;
    expect(config).toMatchObject(exportedConfig);
    const originalConfig = JSON.parse(await readFile(ws.path("model", "config.json"), "utf8")) as Record<string, unknown>;
    expect(Object.keys(originalConfig).filter((k) => !(k in config) && !writerKey(k))).toEqual([]);
    const original = await readCheckpoint(ws.path("model", "model.safetensors"));
    const exported = await readCheckpoint(ws.path("exported", "model.safetensors"));
    expect([...exported.tensors.keys()].sort()).toEqual([...original.tensors.keys()].sort());
    expect(differingTensors(original, exported)).toEqual([]);
  });

  it("kiln train --init-from with --bf16 fine-tunes it, and kiln eval reads the result", async () => {
    await ws.write("ft.yaml", "trainer: { batch_size: 2, seq_len: 7, max_steps: 3, learning_rate: 1.0e-4, lr_schedule: constant, warmup_steps: 0, log_interval: 1, eval_interval: 1000, eval_iters: 1 }\n");
    expectSuccess(await ws.run(["train", "-f", "ft.yaml", "--init-from", "model", "-d", "train.bin", "--bf16", "--output-dir", "ft", "--headless"]), "kiln train --bf16");
    const tuned = await evalLoss("ft/final.safetensors");
    // Three small steps on other data: the model is still the one transformers computed, near its loss.
    expect(Math.abs(tuned.loss - reference.loss) / reference.loss).toBeLessThan(0.05);
    // The run's data has no tokenizer of its own: the folder's tokenizer decodes.
    expect(await sample("ft/final.safetensors", ["--tokenizer", "model"])).toMatch(/^a b c\s*\S/);
  });

  it("transformers reads the export of a fine-tune that moved the weights and computes kiln eval's loss, to 1e-6", async (ctx) => {
    if (!HF_PYTHON) ctx.skip("set KILN_HF_PYTHON to a Python with torch and transformers to run transformers on kiln's export");
    await ws.write("moved.yaml", "trainer: { batch_size: 2, seq_len: 7, max_steps: 3, learning_rate: 1.0e-2, lr_schedule: constant, warmup_steps: 0, log_interval: 1, eval_interval: 1000, eval_iters: 1 }\n");
    expectSuccess(await ws.run(["train", "-f", "moved.yaml", "--init-from", "model", "-d", "train.bin", "--output-dir", "moved", "--headless"]), "kiln train");
    expectSuccess(await ws.run(["export", "--checkpoint", "moved/final.safetensors", "--out", "moved-hf"]), "kiln export");
    const kiln = await evalLoss("moved-hf");
    const r = spawnSync(HF_PYTHON!, [READBACK, ws.path("moved-hf"), ws.path("data.bin"), String(reference.seqLen)], { encoding: "utf8", timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    const hf = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { loss: number; windows: number; class: string };
    expect(hf.class).toBe((exportedConfig.architectures as string[])[0]);
    expect(Math.abs(kiln.loss - reference.loss) / reference.loss, "the fine-tune moved the weights").toBeGreaterThan(1e-3);
    expect(Math.abs(hf.loss - kiln.loss) / kiln.loss).toBeLessThan(1e-6);
  });
});

/** Every fixture folder, the families' variants beside the ones above (kiln eval alone). */
const ALL_FOLDERS = ["qwen2-tiny", "qwen2-tied-tiny", "qwen2-window-tiny", "llama3-tiny", "llama-linear-tiny", "llama-headdim-tiny", "llama-bias-tiny", "qwen3-tiny", "qwen3-window-tiny", "mistral-tiny", "gemma3-tiny"];

describe("kiln eval on every fixture folder", () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await Workspace.create("hf-family-eval");
  });
  afterAll(() => ws.remove());

  it.each(ALL_FOLDERS)("%s: the loss transformers computes, to 1e-5", async (name) => {
    const r = await openSafetensors(path.join(FIXTURES, name, "reference.safetensors"));
    const loss = new Float32Array((await r.read("loss")).data.slice().buffer)[0];
    const sequence = Uint32Array.from(new Float32Array((await r.read("sequence")).data.slice().buffer));
    const seqLen = Number(r.metadata.seq_len);
    await r.close();
    await ws.writeTokens(`${name}.bin`, sequence);
    const out = expectSuccess(await ws.run(["eval", "--checkpoint", path.join(FIXTURES, name), "-d", `${name}.bin`, "--seq-len", String(seqLen), "--json"]), "kiln eval");
    expect(Math.abs((JSON.parse(out.stdout) as { loss: number }).loss - loss) / loss).toBeLessThan(1e-5);
  });
});
