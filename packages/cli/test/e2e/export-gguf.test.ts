import { readFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeGgml, interleaveRopeRows, openSafetensors, readGgufHeader } from "@kiln/core";
import { expectSuccess } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// kiln export --format gguf of a Llama (GQA, untied) trained on gpt2-tokenized text: kiln's
// GGUF reader reads back llama.cpp's keys, the tokenizer and every tensor (q and k rows
// interleaved for llama.cpp's RoPE, matrices in the asked type, norms in f32).
const MODEL = { arch: "llama", vocab_size: 50304, hidden_size: 64, num_layers: 2, num_heads: 4, kv_heads: 2, max_seq_len: 32, intermediate_size: 96 };

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("export-gguf");
  await ws.write("corpus.txt", "The fox ran to the river and looked at the fish. The bird said: why do you look at the fish?\n".repeat(40));
  expectSuccess(await ws.run(["prepare", "-i", "corpus.txt", "-o", "data.bin", "--tokenizer", "gpt2"]), "kiln prepare");
  await ws.writeConfig("llama.yaml", { model: MODEL, trainer: { max_steps: 4, seq_len: 32, batch_size: 2, eval_interval: 1000 } });
  expectSuccess(await ws.run(["train", "-f", "llama.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "kiln train");
});
afterAll(() => ws.remove());

describe("kiln export --format gguf", () => {
  it.each([
    ["f32", 0],
    ["f16", 1e-3],
    ["q8_0", 0.02],
  ] as const)("writes %s: llama.cpp's keys, the gpt2 tokenizer padded to the model's vocabulary, every tensor", async (type, tolerance) => {
    const r = expectSuccess(await ws.run(["export", "--checkpoint", "out/final.safetensors", "--format", "gguf", "--dtype", type, "--out", `m-${type}.gguf`]), "kiln export");
    expect(r.stdout).toMatch(new RegExp(`wrote m-${type}\\.gguf: llama\\.cpp architecture llama, 21 tensors`));
    const g = await readGgufHeader(ws.path(`m-${type}.gguf`));
    const meta = (key: string) => g.metadata.get(key);
    expect(meta("general.architecture")).toEqual({ type: "string", value: "llama" });
    expect(meta("llama.attention.head_count_kv")).toEqual({ type: "u32", value: 2 });
    expect(meta("llama.rope.dimension_count")).toEqual({ type: "u32", value: 16 });
    expect(meta("tokenizer.ggml.pre")).toEqual({ type: "string", value: "gpt-2" });
    const tokens = meta("tokenizer.ggml.tokens") as { values: string[] };
    expect(tokens.values).toHaveLength(50304);
    expect(tokens.values.slice(50256, 50258)).toEqual(["<|endoftext|>", "[PAD50257]"]);
    expect((meta("tokenizer.ggml.merges") as { values: string[] }).values).toHaveLength(50000);

    const ckpt = await openSafetensors(ws.path("out", "final.safetensors"));
    const file = new Uint8Array(await readFile(ws.path(`m-${type}.gguf`)));
    const tensor = (name: string) => {
      const t = g.tensors.find((x) => x.name === name)!;
      return { t, values: decodeGgml(file.subarray(t.offset, t.offset + t.bytes), t.type, t.ne.reduce((a, b) => a * b, 1)) };
    };
    const hf = async (name: string) => new Float32Array((await ckpt.read(name)).data.slice().buffer);
    const close = (a: Float32Array, b: Float32Array) => {
      let scale = 0, err = 0;
      for (let i = 0; i < b.length; i++) (scale = Math.max(scale, Math.abs(b[i]))), (err = Math.max(err, Math.abs(a[i] - b[i])));
      expect(err).toBeLessThanOrEqual(tolerance * scale);
    };
    const q = tensor("blk.1.attn_q.weight");
    expect(q.t).toMatchObject({ ne: [64, 64], type });
    close(q.values, interleaveRopeRows(await hf("model.layers.1.self_attn.q_proj.weight"), 4, 64));
    close(tensor("blk.0.attn_k.weight").values, interleaveRopeRows(await hf("model.layers.0.self_attn.k_proj.weight"), 2, 64));
    close(tensor("blk.0.ffn_down.weight").values, await hf("model.layers.0.mlp.down_proj.weight"));
    close(tensor("output.weight").values, await hf("lm_head.weight"));
    const norm = tensor("blk.0.attn_norm.weight");
    expect(norm.t.type).toBe("f32");
    expect(norm.values).toEqual(await hf("model.layers.0.input_layernorm.weight"));
    await ckpt.close();
  });

  it("refuses q8_0 for a Hugging Face folder, and layers llama.cpp has no architecture for, writing nothing", async () => {
    const hf = await ws.run(["export", "--checkpoint", "out/final.safetensors", "--dtype", "q8_0", "--out", "hf"]);
    expect(hf.code).not.toBe(0);
    expect(hf.stderr).toMatch(/--dtype q8_0 is a GGUF quantization; a Hugging Face folder holds f32, bf16 or f16/);
    expect(existsSync(ws.path("hf"))).toBe(false);
    await ws.writeConfig("moe.yaml", { model: { ...MODEL, vocab_size: 256, num_experts: 4, experts_per_tok: 2, shared_expert_enabled: true }, trainer: { max_steps: 1, seq_len: 32, batch_size: 2, eval_interval: 1000 } });
    await ws.writeTokens("bytes.bin", Uint32Array.from({ length: 400 }, (_, i) => i % 200));
    expectSuccess(await ws.run(["train", "-f", "moe.yaml", "-d", "bytes.bin", "--output-dir", "moe-out", "--headless"]), "kiln train");
    const r = await ws.run(["export", "--checkpoint", "moe-out/final.safetensors", "--format", "gguf", "--out", "moe.gguf"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/llama\.cpp's llama architecture has no ungated shared expert, which this llama checkpoint has/);
    expect(r.stderr).toMatch(/--format hf/);
    expect(existsSync(ws.path("moe.gguf"))).toBe(false);
  });

  it("kiln sample runs the GGUF file as it runs the checkpoint, and refuses a corrupt or truncated one naming the byte", async () => {
    const args = ["--prompt", "The fox", "--temperature", "0", "--max-tokens", "12"];
    const fromCheckpoint = expectSuccess(await ws.run(["sample", "--checkpoint", "out/final.safetensors", ...args]), "kiln sample").stdout;
    expect(expectSuccess(await ws.run(["sample", "--checkpoint", "m-f32.gguf", ...args]), "kiln sample").stdout).toBe(fromCheckpoint);
    const whole = new Uint8Array(await readFile(ws.path("m-f32.gguf")));
    await ws.write("truncated.gguf", whole.subarray(0, whole.length - 1000));
    const truncated = await ws.run(["sample", "--checkpoint", "truncated.gguf", ...args]);
    expect(truncated.code).not.toBe(0);
    expect(truncated.stderr).toMatch(/truncated\.gguf \(byte \d+\)/);
    expect(truncated.stderr).toMatch(/runs past the end of the file/);
    const corrupt = whole.slice(0, 4096);
    new DataView(corrupt.buffer).setUint32(4, 99, true); // an unknown version
    await ws.write("corrupt.gguf", corrupt);
    const bad = await ws.run(["sample", "--checkpoint", "corrupt.gguf", ...args]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/corrupt\.gguf \(byte 4\)/);
  });
});
