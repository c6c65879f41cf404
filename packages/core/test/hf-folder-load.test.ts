import { mkdtemp, readFile, readdir, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckpointError, bf16ToF32, f32ToBf16 } from "@kiln/contract";
import { PretrainedWeights } from "../src/hf/pretrained-weights.js";
import { TINY_GPT2, TINY_LLAMA, randomWeights, writeHfFolder, writeKilnCheckpoint } from "./support/hf-folders.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-hf-load-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(location: string): Promise<{ model: PretrainedWeights["model"]; weights: Map<string, Float32Array> }> {
  const source = await PretrainedWeights.open(location);
  try {
    return { model: source.model, weights: await source.read() };
  } finally {
    await source.close();
  }
}

async function refusal(location: string): Promise<CheckpointError> {
  const err = await PretrainedWeights.open(location).then(
    async (s) => {
      await s.close();
      throw new Error("the folder was accepted");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CheckpointError);
  return err as CheckpointError;
}

/** What pieces() gives, put back together per parameter; also checks the pieces' bounds and order. */
async function fromPieces(location: string, pieceBytes: number): Promise<Map<string, Float32Array>> {
  const source = await PretrainedWeights.open(location);
  const out = new Map<string, Float32Array>();
  const next = new Map<string, number>();
  try {
    for await (const p of source.pieces(pieceBytes)) {
      expect(p.values.byteLength).toBeLessThanOrEqual(Math.max(4, pieceBytes));
      // Each parameter's pieces come in order, one after the other.
      expect(p.elementOffset).toBe(next.get(p.name) ?? 0);
      next.set(p.name, p.elementOffset + p.values.length);
      const whole = out.get(p.name) ?? new Float32Array(p.elements);
      whole.set(p.values, p.elementOffset);
      out.set(p.name, whole);
    }
  } finally {
    await source.close();
  }
  return out;
}

describe("--init-from sources", () => {
  it("reads the same weights piece by piece (f32 and bf16 files, pieces smaller than a tensor)", async () => {
    const w = randomWeights(TINY_LLAMA);
    await writeKilnCheckpoint(path.join(dir, "final.safetensors"), TINY_LLAMA, w);
    expect(await fromPieces(path.join(dir, "final.safetensors"), 100)).toEqual(w);
    const g = randomWeights(TINY_GPT2);
    await writeHfFolder(path.join(dir, "gpt2-bf16"), TINY_GPT2, g, { dtype: "BF16" });
    expect(await fromPieces(path.join(dir, "gpt2-bf16"), 36)).toEqual((await load(path.join(dir, "gpt2-bf16"))).weights);
  });

  it("a kiln checkpoint: its model and weights, optimizer state ignored", async () => {
    const w = randomWeights(TINY_LLAMA);
    await writeKilnCheckpoint(path.join(dir, "final.safetensors"), TINY_LLAMA, w);
    const got = await load(path.join(dir, "final.safetensors"));
    expect(got.model).toEqual(TINY_LLAMA);
    expect(got.weights).toEqual(w);
  });

  it("GPT-2 without the transformer. prefix, with mask buffers and a tied lm_head, in bf16", async () => {
    const w = randomWeights(TINY_GPT2);
    const mask = { name: "h.0.attn.bias", dtype: "F32" as const, shape: [1, 1, 8, 8], data: new Float32Array(64) };
    const head = { name: "lm_head.weight", dtype: "BF16" as const, shape: [40, 16], data: new Uint16Array(640) };
    await writeHfFolder(path.join(dir, "gpt2"), TINY_GPT2, w, { dropPrefix: true, dtype: "BF16", extra: [mask, head] });
    const got = await load(path.join(dir, "gpt2"));
    expect(got.model).toEqual(TINY_GPT2);
    const name = "transformer.h.1.attn.c_attn.weight";
    expect(got.weights.get(name)!.slice(0, 5)).toEqual(Float32Array.from(w.get(name)!.slice(0, 5), (x) => bf16ToF32(f32ToBf16(x))));
    expect([...got.weights.keys()].every((n) => n.startsWith("transformer."))).toBe(true);
  });

  it("sharded Llama in f16 with model.safetensors.index.json", async () => {
    const w = randomWeights(TINY_LLAMA);
    await writeHfFolder(path.join(dir, "llama"), TINY_LLAMA, w, { shards: 3, dtype: "F16" });
    const got = await load(path.join(dir, "llama"));
    expect(got.model).toEqual(TINY_LLAMA);
    expect(got.weights.size).toBe(w.size);
    const v = got.weights.get("model.layers.1.mlp.down_proj.weight")!;
    const x = w.get("model.layers.1.mlp.down_proj.weight")!;
    for (let i = 0; i < v.length; i++) expect(Math.abs(v[i] - x[i])).toBeLessThanOrEqual(Math.abs(x[i]) * 2 ** -11 + 1e-7);
  });

  it("refuses a missing shard, naming the index, the shard and a tensor", async () => {
    await writeHfFolder(path.join(dir, "m"), TINY_LLAMA, randomWeights(TINY_LLAMA), { shards: 2 });
    await rm(path.join(dir, "m", "model-00002-of-00002.safetensors"));
    const err = await refusal(path.join(dir, "m"));
    expect(err.where).toBe(path.join(dir, "m", "model.safetensors.index.json"));
    expect(err.message).toMatch(/^shard model-00002-of-00002\.safetensors is missing \(the index puts tensor model\.\S+ in it\)$/);
  });

  it("refuses a truncated shard, naming the file and the tensor cut off", async () => {
    await writeHfFolder(path.join(dir, "m"), TINY_LLAMA, randomWeights(TINY_LLAMA), { shards: 2 });
    const shard = path.join(dir, "m", "model-00001-of-00002.safetensors");
    const { size } = await import("node:fs/promises").then((fs) => fs.stat(shard));
    await truncate(shard, size - 10);
    const err = await refusal(path.join(dir, "m"));
    expect(err.where).toMatch(new RegExp(`^${shard.replace(/[.]/g, "\\.")} \\(tensor "model\\.`));
    expect(err.message).toContain("truncated");
  });

  it("refuses a shape that config.json does not describe, naming file and tensor", async () => {
    await writeHfFolder(path.join(dir, "m"), TINY_LLAMA, randomWeights(TINY_LLAMA), { config: { intermediate_size: 32 } });
    const err = await refusal(path.join(dir, "m"));
    expect(err.where).toBe(path.join(dir, "m", "model.safetensors"));
    expect(err.message).toBe("tensor model.layers.0.mlp.gate_proj.weight has shape [24, 16], but config.json says the model needs [32, 16]");
  });

  it("refuses an unknown model_type, an incomplete or unknown rope_scaling by name, and a tensor kiln has no place for", async () => {
    const w = randomWeights(TINY_LLAMA);
    await writeHfFolder(path.join(dir, "a"), TINY_LLAMA, w, { config: { model_type: "mixtral" } });
    expect((await refusal(path.join(dir, "a"))).where).toBe(path.join(dir, "a", "config.json (model_type)"));
    await writeHfFolder(path.join(dir, "b"), TINY_LLAMA, w, { config: { rope_scaling: { rope_type: "llama3", factor: 8 } } });
    expect((await refusal(path.join(dir, "b"))).where).toBe(path.join(dir, "b", "config.json (rope_scaling.low_freq_factor)"));
    await writeHfFolder(path.join(dir, "y"), TINY_LLAMA, w, { config: { rope_scaling: { rope_type: "yarn", factor: 8 } } });
    expect((await refusal(path.join(dir, "y"))).where).toBe(path.join(dir, "y", "config.json (rope_scaling.rope_type)"));
    const stray = { name: "model.layers.0.self_attn.q_proj.bias", dtype: "F32" as const, shape: [16], data: new Float32Array(16) };
    await writeHfFolder(path.join(dir, "c"), TINY_LLAMA, w, { extra: [stray] });
    expect((await refusal(path.join(dir, "c"))).message).toBe("tensor model.layers.0.self_attn.q_proj.bias is not a parameter of kiln's llama model");
  });

  it("refuses a folder without weights, and says when it holds only pytorch_model.bin", async () => {
    await writeHfFolder(path.join(dir, "m"), TINY_GPT2, randomWeights(TINY_GPT2));
    await rm(path.join(dir, "m", "model.safetensors"));
    await writeFile(path.join(dir, "m", "pytorch_model.bin"), "");
    const err = await refusal(path.join(dir, "m"));
    expect(err.hint).toContain("safetensors weights only");
    expect(await readdir(path.join(dir, "m"))).toEqual(["config.json", "pytorch_model.bin"]);
    expect(JSON.parse(await readFile(path.join(dir, "m", "config.json"), "utf8")).model_type).toBe("gpt2");
  });
});
