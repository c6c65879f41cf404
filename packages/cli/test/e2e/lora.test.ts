import { execFileSync } from "node:child_process";
import { cp, readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readCheckpoint } from "./support/checkpoints.js";
import { expectRefused } from "./support/expectations.js";
import { jsonLines } from "./support/kiln-process.js";
import { REPO_ROOT } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// LoRA through the CLI: a small Llama folder with a chat template (a base kiln trained and
// exported) fine-tuned with adapters on other answers, exported merged and as a PEFT adapter.

const CHAT = path.join(REPO_ROOT, "packages", "core", "test", "fixtures", "chat");
const PEFT_FIXTURES = path.join(REPO_ROOT, "packages", "core", "test", "fixtures", "lora");
// With a Python that has torch, transformers and peft ($KILN_HF_PYTHON, e.g. .venv-hf/bin/python
// from tooling/fixtures/make-hf-venv.sh), PEFT loads kiln's adapter over the base folder too.
const HF_PYTHON = process.env.KILN_HF_PYTHON;

/** The assistant's replies of the fixture's conversations, swapped around: the adapters learn other answers to the same questions, in words the base knows. */
const SWAPPED: Record<string, string> = {
  "The capital of France is Paris.": "One, two, three.",
  "One, two, three.": "Hello, hello!",
  "Hello, hello!": "The capital of France is Paris.",
  "Blue.": "Green.",
  "Green.": "Blue.",
};

const f32 = (b: Uint8Array) => new Float32Array(b.slice().buffer);

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("lora");
  await cp(path.join(CHAT, "tokenizer"), ws.path("tok"), { recursive: true });
  const rows = (await readFile(path.join(CHAT, "chat.jsonl"), "utf8")).trim().split("\n");
  const swapped = rows.map((r) => {
    const row = JSON.parse(r) as { messages: { role: string; content: string }[] };
    for (const m of row.messages) if (m.role === "assistant") m.content = SWAPPED[m.content];
    return JSON.stringify(row);
  });
  await ws.write("many.jsonl", `${Array.from({ length: 40 }, () => rows).flat().join("\n")}\n`);
  await ws.write("swapped.jsonl", `${Array.from({ length: 40 }, () => swapped).flat().join("\n")}\n`);
  expectSuccess(await ws.run(["prepare", "-i", "many.jsonl", "-o", "many.bin", "--tokenizer", "tok", "--seq-len", "48"]), "kiln prepare");
  // The base: a tiny Llama trained on the fixture's answers, exported as a Hugging Face folder with its tokenizer and chat template.
  await ws.write(
    "base.yaml",
    "model: { arch: llama, vocab_size: 400, hidden_size: 32, num_layers: 1, num_heads: 2, max_seq_len: 48 }\n" +
      "trainer: { batch_size: 4, seq_len: 48, max_steps: 100, learning_rate: 0.01, log_interval: 1, eval_interval: 1000, save_interval: 1000, seed: 3 }\n",
  );
  expectSuccess(await ws.run(["train", "-f", "base.yaml", "-d", "many.bin", "--output-dir", "base-run", "--headless"]), "kiln train (base)");
  expectSuccess(await ws.run(["export", "--checkpoint", "base-run/final.safetensors", "--out", "base"]), "kiln export (base)");
  expectSuccess(await ws.run(["prepare", "-i", "swapped.jsonl", "-o", "swapped.bin", "--tokenizer", "base", "--seq-len", "48"]), "kiln prepare (swapped)");
  await ws.write("tune.yaml", "trainer: { batch_size: 4, seq_len: 48, max_steps: 60, learning_rate: 0.02, log_interval: 1, eval_interval: 1000, save_interval: 1000, seed: 5 }\n");
});
afterAll(() => ws.remove());

const answer = async (checkpoint: string, prompt: string) =>
  expectSuccess(await ws.run(["sample", "--chat", "--checkpoint", checkpoint, "--temperature", "0", "--max-tokens", "40", "--prompt", prompt]), "kiln sample --chat").stdout;

describe("LoRA fine-tuning of a Llama folder", () => {
  it("trains adapters alone (the base frozen, no optimizer state for it), and kiln sample --chat answers as trained", async () => {
    expect(await answer("base-run/final.safetensors", "Count to three.")).toBe("One, two, three.\n");
    const r = expectSuccess(await ws.run(["train", "-f", "tune.yaml", "--init-from", "base", "-d", "swapped.bin", "--lora-rank", "4", "--output-dir", "tuned", "--headless"]), "kiln train --lora-rank");
    expect(r.stderr).toMatch(/LoRA +rank 4, alpha 8 on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj: 2\.18K trained \(5\.\d\d%\), the 35\.9K of the base frozen/);
    const losses = jsonLines(r.stdout).flatMap((l) => (typeof l.loss === "number" ? [l.loss] : []));
    expect(losses[0]).toBeGreaterThan(1);
    expect(losses.at(-1)!).toBeLessThan(0.2);
    expect(await answer("tuned/final.safetensors", "What is the capital of France?")).toBe("One, two, three.\n");
    expect(await answer("tuned/final.safetensors", "Count to three.")).toBe("Hello, hello!\n");
    expect(await answer("tuned/final.safetensors", "Say hello twice.")).toBe("The capital of France is Paris.\n");
    // kiln eval scores the LoRA checkpoint directly, over the replies' tokens.
    const scored = JSON.parse(expectSuccess(await ws.run(["eval", "--checkpoint", "tuned/final.safetensors", "-d", "swapped.bin", "--json"]), "kiln eval").stdout) as { loss: number; examples: number };
    expect(scored.examples).toBe(160);
    expect(scored.loss).toBeLessThan(0.2);

    const ckpt = await readCheckpoint(ws.path("tuned", "step_60.safetensors"));
    const base = await readCheckpoint(ws.path("base", "model.safetensors"));
    for (const [name, bytes] of base.tensors) expect(Buffer.from(ckpt.tensors.get(name)!).equals(Buffer.from(bytes)), name).toBe(true);
    const optimizer = [...ckpt.tensors.keys()].filter((n) => n.startsWith("optimizer.exp_avg."));
    expect(optimizer.length).toBe(14);
    expect(optimizer.every((n) => /\.lora_[AB]\.weight$/.test(n))).toBe(true);
    expect(ckpt.metadata["kiln.base_model"]).toBe(ws.path("base"));
  });

  it("exports the merged model (base + alpha/rank·B·A, the rest bit-identical) and the PEFT adapter it came from", async () => {
    expectSuccess(await ws.run(["export", "--checkpoint", "tuned/final.safetensors", "--out", "merged"]), "kiln export");
    const e = expectSuccess(await ws.run(["export", "--checkpoint", "tuned/final.safetensors", "--out", "adapter", "--adapter-only"]), "kiln export --adapter-only");
    expect(e.stdout).toBe("wrote adapter: adapter_config.json, adapter_model.safetensors\n");
    const config = JSON.parse(await readFile(ws.path("adapter", "adapter_config.json"), "utf8"));
    expect(config).toMatchObject({ peft_type: "LORA", task_type: "CAUSAL_LM", r: 4, lora_alpha: 8, base_model_name_or_path: ws.path("base"), fan_in_fan_out: false });
    expect(config.target_modules).toEqual(["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]);
    const adapter = await readCheckpoint(ws.path("adapter", "adapter_model.safetensors"));
    expect(adapter.tensors.size).toBe(14);
    expect(adapter.tensors.has("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")).toBe(true);
    const hfConfig = JSON.parse(await readFile(ws.path("merged", "config.json"), "utf8"));
    expect(hfConfig.architectures).toEqual(["LlamaForCausalLM"]);

    const base = await readCheckpoint(ws.path("base", "model.safetensors"));
    const merged = await readCheckpoint(ws.path("merged", "model.safetensors"));
    expect([...merged.tensors.keys()].sort()).toEqual([...base.tensors.keys()].sort());
    const scale = 8 / 4;
    let mergedCount = 0;
    for (const [name, bytes] of base.tensors) {
      const module = name.replace(/\.weight$/, "");
      const a = adapter.tensors.get(`base_model.model.${module}.lora_A.weight`);
      if (!a) {
        expect(Buffer.from(merged.tensors.get(name)!).equals(Buffer.from(bytes)), name).toBe(true);
        continue;
      }
      mergedCount++;
      const [A, B, W, M] = [f32(a), f32(adapter.tensors.get(`base_model.model.${module}.lora_B.weight`)!), f32(bytes), f32(merged.tensors.get(name)!)];
      const inF = A.length / 4;
      const outF = B.length / 4;
      let worst = 0;
      for (let o = 0; o < outF; o++) {
        for (let i = 0; i < inF; i++) {
          let sum = 0;
          for (let r = 0; r < 4; r++) sum += B[o * 4 + r] * A[r * inF + i];
          const want = W[o * inF + i] + scale * sum;
          worst = Math.max(worst, Math.abs(M[o * inF + i] - want) / Math.max(1e-3, Math.abs(want)));
        }
      }
      expect(worst, name).toBeLessThan(1e-6);
    }
    expect(mergedCount).toBe(7);
    // A GGUF of the checkpoint holds the merged model too, and answers as trained.
    expectSuccess(await ws.run(["export", "--checkpoint", "tuned/final.safetensors", "--out", "tuned.gguf", "--format", "gguf"]), "kiln export --format gguf");
    expect(await answer("tuned.gguf", "Count to three.")).toBe("Hello, hello!\n");
    // The merged folder answers as the LoRA checkpoint does.
    expectSuccess(await ws.run(["train", "--init-from", "merged", "-d", "swapped.bin", "--max-steps", "1", "--learning-rate", "1e-9", "--output-dir", "merged-run", "--headless"]), "kiln train --init-from merged");
    expect(await answer("merged-run/final.safetensors", "Count to three.")).toBe("Hello, hello!\n");
  });

  it.runIf(HF_PYTHON !== undefined)("PEFT loads kiln's adapter over the base and computes what transformers computes on the merged folder", () => {
    const script = path.join(REPO_ROOT, "tooling", "fixtures", "peft_readback.py");
    const ids = "[[1, 30, 200, 7, 391, 12]]";
    const run = (adapterDir: string, baseDir: string) => JSON.parse(execFileSync(HF_PYTHON!, [script, ws.path(baseDir), adapterDir, ids], { encoding: "utf8" })) as { logits: number[] };
    const peft = run(ws.path("adapter"), "base").logits;
    const plain = run("-", "merged").logits;
    const scale = Math.max(...plain.map(Math.abs));
    expect(Math.max(...peft.map((v, i) => Math.abs(v - plain[i]))) / scale).toBeLessThan(1e-5);
  });

  it("trains with --lora-dropout, says so, and writes it into the exported adapter's config", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "tune.yaml", "--init-from", "base", "-d", "swapped.bin", "--lora-rank", "4", "--lora-dropout", "0.1", "--max-steps", "3", "--output-dir", "dropped", "--headless"]), "kiln train --lora-dropout");
    expect(r.stderr).toMatch(/LoRA +rank 4, alpha 8, dropout 0\.1 on /);
    expectSuccess(await ws.run(["export", "--checkpoint", "dropped/final.safetensors", "--out", "dropped-adapter", "--adapter-only"]), "kiln export --adapter-only");
    expect(JSON.parse(await readFile(ws.path("dropped-adapter", "adapter_config.json"), "utf8")).lora_dropout).toBe(0.1);
  });

  it("goes on training an adapter from its PEFT folder (--lora-from), and plans less memory than a full fine-tune", async () => {
    const fresh = expectSuccess(await ws.run(["train", "-f", "tune.yaml", "--init-from", "base", "-d", "swapped.bin", "--lora-rank", "4", "--max-steps", "1", "--output-dir", "fresh", "--headless"]), "kiln train");
    const r = expectSuccess(await ws.run(["train", "-f", "tune.yaml", "--init-from", "base", "--lora-from", "adapter", "-d", "swapped.bin", "--max-steps", "1", "--output-dir", "again", "--headless"]), "kiln train --lora-from");
    expect(r.stderr).toMatch(/weights from base, LoRA adapters from adapter \(optimizer state fresh\)/);
    const first = (out: string) => jsonLines(out).find((l) => typeof l.loss === "number")!.loss as number;
    expect(first(fresh.stdout)).toBeGreaterThan(1);
    expect(first(r.stdout)).toBeLessThan(0.2);

    const plan = async (extra: string[]) => {
      const e = expectSuccess(await ws.run(["estimate", "--init-from", "base", "--batch-size", "4", "--seq-len", "48", "--json", ...extra]), "kiln estimate");
      return JSON.parse(e.stdout) as { memory: { total: number; gradients: number; optimizerState: number } };
    };
    const [full, lora] = [await plan([]), await plan(["--lora-rank", "4"])];
    expect(lora.memory.total).toBeLessThan(full.memory.total);
    expect(lora.memory.optimizerState).toBeLessThan(full.memory.optimizerState / 10);
  });

  it("refuses an adapter of another base naming the tensor, --lora-from without a base, and unknown targets", async () => {
    await cp(path.join(PEFT_FIXTURES, "llama-adapter"), ws.path("other-adapter"), { recursive: true });
    expectRefused(await ws.run(["train", "-f", "tune.yaml", "--init-from", "base", "--lora-from", "other-adapter", "-d", "swapped.bin", "--output-dir", "x", "--headless"]), {
      kind: "CheckpointError",
      where: path.join("other-adapter", "adapter_model.safetensors"),
      message: /tensor base_model\.model\.model\.layers\.0\.self_attn\.k_proj\.lora_B\.weight has shape \[16, 3\], but for this base \(and the adapter's r 3\) the model needs \[32, 3\]/,
      hint: /do not belong together/,
    });
    expectRefused(await ws.run(["train", "-f", "tune.yaml", "--lora-from", "adapter", "-d", "swapped.bin", "--output-dir", "x", "--headless"]), {
      kind: "ConfigError",
      where: "--lora-from",
      message: /no base was given/,
      hint: /add --init-from BASE/,
    });
    expectRefused(await ws.run(["train", "-f", "tune.yaml", "--init-from", "base", "--lora-rank", "4", "--lora-targets", "q_proj,c_attn", "-d", "swapped.bin", "--output-dir", "x", "--headless"]), {
      kind: "ConfigError",
      where: "--lora-targets",
      message: /LoRA target c_attn names no weight matrix of this model/,
      hint: /q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj/,
    });
    expectRefused(await ws.run(["export", "--checkpoint", "base-run/final.safetensors", "--out", "no-adapter", "--adapter-only"]), {
      kind: "CheckpointError",
      where: "base-run/final.safetensors",
      message: /the checkpoint has no LoRA adapters/,
      hint: /leave out --adapter-only/,
    });
  });
});
