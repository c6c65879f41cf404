import { mkdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "@kiln/contract";
import { type GgmlType, InferenceSession, TokenGenerator, exportGguf, HfTokenizer, type Tokenizer, generateStories, getTokenizer, gpt2TokenizerFiles, openGgufWeights, readGgufHeader } from "@kiln/core";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { LlamaCpp, relativeError } from "./support/llama-cpp.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// GGUF files kiln writes, run by llama.cpp (node-llama-cpp's prebuilt CPU build): for a GPT-2
// and a Llama (GQA) trained a few hundred steps on stories with the gpt2 tokenizer, and for
// a Llama mixture of experts (Mixtral's layout), Mistral, Qwen2, Qwen3 and Gemma 3 models:
// llama.cpp's greedy completions equal kiln's (`kiln sample --temperature 0`) in f32, f16
// and bf16, its tokenization equals kiln's, its next-token logits equal kiln's to 1e-3 of
// their scale; q8_0 files agree on 16 greedy tokens and kiln's own dequantized logits stay
// within 2% of f32's. Then the tokenizers: bytes, cl100k, o200k and tokenizer folders.
const PROMPTS = ["Once upon a time", "The little dog", "She looked at the"];
const PARAGRAPH = "Once upon a time, in a small town by the sea, there lived a girl named Lily. She loved to play outside; every day at 3 o'clock she ran to the park (with her dog, Max!) and said: \"Hello, world!\"\n\nThe end.";
const GREEDY = 16;
const BASE = { vocab_size: 50304, hidden_size: 64, num_layers: 2, num_heads: 4, max_seq_len: 64 };
const TRAINER = { seq_len: 64, batch_size: 4, learning_rate: 3e-3, warmup_steps: 20, eval_interval: 10000, save_interval: 10000, log_interval: 50 };

interface Family {
  name: string;
  model: Record<string, unknown>;
  steps: number;
  arch: string;
  /** Tokens whose next-token logits are compared: within a sliding window, where llama.cpp's full attention agrees. */
  logitTokens?: number;
}

const FAMILIES: Family[] = [
  { name: "gpt2", model: { arch: "gpt2" }, steps: 200, arch: "gpt2" },
  { name: "llama", model: { arch: "llama", kv_heads: 2, intermediate_size: 128 }, steps: 200, arch: "llama" },
  { name: "llama-moe", model: { arch: "llama", kv_heads: 2, intermediate_size: 64, num_experts: 4, experts_per_tok: 2 }, steps: 200, arch: "llama" },
  { name: "mistral", model: { arch: "mistral", kv_heads: 2, intermediate_size: 128, sliding_window: 32 }, steps: 60, arch: "llama", logitTokens: 32 },
  { name: "qwen2", model: { arch: "qwen2", kv_heads: 2, intermediate_size: 128 }, steps: 60, arch: "qwen2" },
  { name: "qwen3", model: { arch: "qwen3", kv_heads: 2, intermediate_size: 128, head_dim: 32 }, steps: 60, arch: "qwen3" },
  {
    name: "gemma3",
    model: { arch: "gemma3", kv_heads: 2, intermediate_size: 128, head_dim: 16, sliding_window: 8, layer_types: ["sliding_attention", "full_attention"], rope_local_base_freq: 10000, rope_theta: 100000 },
    steps: 60,
    arch: "gemma3",
  },
];

let ws: Workspace;
let backend: Backend;
let gpt2: Tokenizer;
beforeAll(async () => {
  ws = await Workspace.create("export-gguf-llama-cpp");
  await ws.write("stories.txt", [...generateStories(7, 60_000)].join("\n"));
  expectSuccess(await ws.run(["prepare", "-i", "stories.txt", "-o", "data.bin", "--tokenizer", "gpt2"]), "kiln prepare");
  backend = await createWasmBackend();
  gpt2 = await getTokenizer("gpt2");
});
afterAll(async () => {
  backend?.dispose();
  await ws?.remove();
});

/** kiln's generator (what kiln sample runs) over a checkpoint or a GGUF file kiln wrote. */
async function withKiln<T>(file: string, use: (g: TokenGenerator) => Promise<T>): Promise<T> {
  const path = ws.path(file);
  const session = file.endsWith(".gguf") ? await TokenGenerator.fromTensors(backend, await openGgufWeights(path), path) : await InferenceSession.fromCheckpoint(backend, path);
  try {
    return await use(session);
  } finally {
    session.dispose();
  }
}

/** Next-token logits kiln computes after `tokens`. */
const kilnLogits = (file: string, tokens: number[]) => withKiln(file, async (g) => (await g.nextLogits(tokens)).slice());

/** kiln's greedy tokens after each prompt, as kiln sample --temperature 0 picks them. */
const kilnGreedyIds = (file: string, prompts: number[][]) =>
  withKiln(file, async (g) => {
    const out: number[][] = [];
    for (const p of prompts) out.push(await g.generate(p, GREEDY, { temperature: 0, topK: 0, seed: 0 }, () => {}));
    return out;
  });

/** What `kiln sample --temperature 0` prints after the prompt. */
async function kilnGreedy(checkpoint: string, prompt: string): Promise<string> {
  const r = expectSuccess(await ws.run(["sample", "--checkpoint", checkpoint, "--prompt", prompt, "--temperature", "0", "--max-tokens", String(GREEDY), "--threads", "1"]), "kiln sample");
  expect(r.stdout.startsWith(prompt)).toBe(true);
  return r.stdout.slice(prompt.length).replace(/\n$/, "");
}

describe.each(FAMILIES)("a $name model exported as GGUF runs in llama.cpp as in kiln", (family) => {
  const out = `${family.name}-out`;
  const checkpoint = `${out}/final.safetensors`;
  let prompts: number[][];
  let kilnGreedy32: number[][];
  let logitTokens: number[];
  let kilnLogits32: Float32Array;
  beforeAll(async () => {
    await ws.writeConfig(`${family.name}.yaml`, { model: { ...BASE, ...family.model }, trainer: { ...TRAINER, max_steps: family.steps } });
    expectSuccess(await ws.run(["train", "-f", `${family.name}.yaml`, "-d", "data.bin", "--output-dir", out, "--headless"]), "kiln train");
    prompts = PROMPTS.map((p) => gpt2.encode(p));
    kilnGreedy32 = await kilnGreedyIds(checkpoint, prompts);
    logitTokens = gpt2.encode(PARAGRAPH).slice(0, family.logitTokens ?? 40);
    kilnLogits32 = await kilnLogits(checkpoint, logitTokens);
  });

  /** The f32 file through the command a user runs; f16 and q8_0 through the same function in this process. */
  async function exportAs(type: GgmlType): Promise<string> {
    const file = `${family.name}-${type}.gguf`;
    if (type !== "f32") {
      expect((await exportGguf(ws.path(checkpoint), ws.path(file), type)).arch).toBe(family.arch);
      return file;
    }
    const r = expectSuccess(await ws.run(["export", "--checkpoint", checkpoint, "--format", "gguf", "--dtype", type, "--out", file]), "kiln export");
    expect(r.stdout).toContain(`llama.cpp architecture ${family.arch}`);
    return file;
  }

  it.each(["f32", "f16", "bf16"] as const)("%s: greedy completions, tokenization and next-token logits", async (type) => {
    const file = await exportAs(type);
    const llama = await LlamaCpp.load(ws.path(file));
    try {
      expect(llama.tokenize(PARAGRAPH)).toEqual(gpt2.encode(PARAGRAPH));
      // kiln on the same file (16-bit weights widened), as `kiln sample --checkpoint FILE` runs it.
      const ours = type === "f32" ? kilnGreedy32 : await kilnGreedyIds(file, prompts);
      for (const [i, prompt] of prompts.entries()) expect((await llama.greedy(prompt, GREEDY)).ids, `prompt ${JSON.stringify(PROMPTS[i])}`).toEqual(ours[i]);
      if (type === "f32") {
        // The command itself, once: kiln sample prints what llama.cpp completes.
        expect(await kilnGreedy(checkpoint, PROMPTS[0])).toBe((await llama.greedy(prompts[0], GREEDY)).text);
        expect(relativeError(await llama.nextLogits(logitTokens, BASE.vocab_size), kilnLogits32)).toBeLessThan(1e-3);
      }
      // kiln reads the GGUF file back: f32's logits exactly, the 16-bit files' within their rounding.
      expect(relativeError(await kilnLogits(file, logitTokens), kilnLogits32)).toBeLessThan(type === "f32" ? 1e-6 : 0.02);
    } finally {
      await llama.dispose();
    }
  });

  it("q8_0: the first 16 greedy tokens agree; kiln's dequantized logits are within 2% of f32's", async () => {
    const file = await exportAs("q8_0");
    const ours = await kilnGreedyIds(file, prompts);
    const llama = await LlamaCpp.load(ws.path(file));
    try {
      for (const [i, prompt] of prompts.entries()) expect((await llama.greedy(prompt, GREEDY)).ids, `prompt ${JSON.stringify(PROMPTS[i])}`).toEqual(ours[i]);
    } finally {
      await llama.dispose();
    }
    expect(relativeError(await kilnLogits(file, logitTokens), kilnLogits32)).toBeLessThan(0.02);
  });
});

describe("tokenizers written into GGUF files", () => {
  const small = { ...BASE, arch: "llama", kv_heads: 2, intermediate_size: 128 };
  beforeAll(() => ws.write("short.txt", [...generateStories(3, 20_000)].join("\n")));

  it("the bytes tokenizer: llama.cpp reads the bytes kiln reads and completes as kiln sample does", async () => {
    expectSuccess(await ws.run(["prepare", "-i", "short.txt", "-o", "bytes.bin", "--tokenizer", "bytes"]), "kiln prepare");
    await ws.writeConfig("bytes.yaml", { model: { ...small, vocab_size: 256 }, trainer: { ...TRAINER, max_steps: 60 } });
    expectSuccess(await ws.run(["train", "-f", "bytes.yaml", "-d", "bytes.bin", "--output-dir", "bytes-out", "--headless"]), "kiln train");
    expectSuccess(await ws.run(["export", "--checkpoint", "bytes-out/final.safetensors", "--format", "gguf", "--out", "bytes.gguf"]), "kiln export");
    const bytes = await getTokenizer("bytes");
    const llama = await LlamaCpp.load(ws.path("bytes.gguf"));
    try {
      const text = `${PARAGRAPH} Ünïcödé — 日本語`;
      expect(llama.tokenize(text)).toEqual(bytes.encode(text));
      expect(await kilnGreedy("bytes-out/final.safetensors", PROMPTS[0])).toBe((await llama.greedy(bytes.encode(PROMPTS[0]), GREEDY)).text);
    } finally {
      await llama.dispose();
    }
  });

  // tiktoken's encodings as kiln's built-in cl100k and o200k encode: llama.cpp's llama-bpe and
  // gpt-4o pre-tokenizers with the merges rebuilt from the ranks.
  it.each([
    ["cl100k", 100352, "llama-bpe"],
    ["o200k", 200064, "gpt-4o"],
  ] as const)("the built-in %s tokenizer", async (name, vocab, pre) => {
    expectSuccess(await ws.run(["prepare", "-i", "short.txt", "-o", `${name}.bin`, "--tokenizer", name]), "kiln prepare");
    await ws.writeConfig(`${name}.yaml`, { model: { ...small, vocab_size: vocab }, trainer: { ...TRAINER, max_steps: 1 } });
    expectSuccess(await ws.run(["train", "-f", `${name}.yaml`, "-d", `${name}.bin`, "--output-dir", `${name}-out`, "--headless"]), "kiln train");
    expectSuccess(await ws.run(["export", "--checkpoint", `${name}-out/final.safetensors`, "--format", "gguf", "--dtype", "f16", "--out", `${name}.gguf`]), "kiln export");
    expect((await readGgufHeader(ws.path(`${name}.gguf`))).metadata.get("tokenizer.ggml.pre")).toEqual({ type: "string", value: pre });
    const ours = await getTokenizer(name);
    const llama = await LlamaCpp.load(ws.path(`${name}.gguf`));
    try {
      const text = `${PARAGRAPH} In 2024 they counted 1234567 stars, I'M sure you'LL see\r\n  them. Ünïcödé — 日本語`;
      expect(llama.tokenize(text)).toEqual(ours.encode(text));
    } finally {
      await llama.dispose();
    }
  });

  // A byte-level BPE tokenizer folder that splits text as Llama 3 or Qwen2 does (their
  // pre-tokenizer patterns, GPT-2's merges): llama.cpp's pre-tokenizer named in the file
  // splits the same, digits and all.
  it.each([
    ["llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
    ["qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
  ])("a tokenizer folder splitting as %s", async (pre, pattern) => {
    const files = await gpt2TokenizerFiles();
    const json = JSON.parse(files["tokenizer.json"]!) as Record<string, unknown>;
    json.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: pattern }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    };
    const dir = `tokenizer-${pre}`;
    await mkdir(ws.path(dir), { recursive: true });
    await ws.write(`${dir}/tokenizer.json`, JSON.stringify(json));
    await ws.write(`${dir}/tokenizer_config.json`, files["tokenizer_config.json"]!);
    expectSuccess(await ws.run(["prepare", "-i", "short.txt", "-o", `${dir}.bin`, "--tokenizer", `./${dir}`]), "kiln prepare");
    await ws.writeConfig(`${dir}.yaml`, { model: small, trainer: { ...TRAINER, max_steps: 1 } });
    expectSuccess(await ws.run(["train", "-f", `${dir}.yaml`, "-d", `${dir}.bin`, "--output-dir", `${dir}-out`, "--headless"]), "kiln train");
    expectSuccess(await ws.run(["export", "--checkpoint", `${dir}-out/final.safetensors`, "--format", "gguf", "--out", `${dir}.gguf`]), "kiln export");
    const header = await readGgufHeader(ws.path(`${dir}.gguf`));
    expect(header.metadata.get("tokenizer.ggml.pre")).toEqual({ type: "string", value: pre });
    const ours = HfTokenizer.fromFiles(pre, { "tokenizer.json": JSON.stringify(json), "tokenizer_config.json": files["tokenizer_config.json"] });
    const llama = await LlamaCpp.load(ws.path(`${dir}.gguf`));
    try {
      const text = `${PARAGRAPH} In 2024 they counted 1234567 stars, I'M sure you'LL see\r\n  them.`;
      expect(llama.tokenize(text)).toEqual(ours.encode(text));
      expect(ours.encode(text)).not.toEqual(gpt2.encode(text));
      // The file carries the folder's tokenizer for kiln sample as a checkpoint does.
      const sampled = expectSuccess(await ws.run(["sample", "--checkpoint", `${dir}.gguf`, "--prompt", "Once", "--temperature", "0", "--max-tokens", "4"]), "kiln sample");
      const fromCheckpoint = expectSuccess(await ws.run(["sample", "--checkpoint", `${dir}-out/final.safetensors`, "--prompt", "Once", "--temperature", "0", "--max-tokens", "4"]), "kiln sample");
      expect(sampled.stdout).toBe(fromCheckpoint.stdout);
    } finally {
      await llama.dispose();
    }
  });
});
