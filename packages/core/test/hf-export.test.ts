import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckpointError, bf16ToF32, f32ToBf16 } from "@kiln/contract";
import { writeDirectoryAtomically } from "../src/fs/write-atomically.js";
import { readSafetensors } from "../src/checkpoint/safetensors-file.js";
import { exportHfFolder } from "../src/hf/export-hf-folder.js";
import { modelConfigFromHf } from "../src/hf/hf-config.js";
import { PretrainedWeights } from "../src/hf/pretrained-weights.js";
import { openTokenizer } from "../src/data/open-tokenizer.js";
import { gpt2TokenizerFiles } from "../src/data/gpt2-tokenizer-files.js";
import { getTokenizer } from "../src/data/tokenizer.js";
import { BUILTIN_TOKENIZER_JSON_HASHES, sameTokenizer, tokenizerIdentity } from "../src/data/tokenizer-files.js";
import { META_TOKENIZER, META_TOKENIZER_FILES } from "../src/checkpoint/checkpoint-keys.js";
import { TINY_TOKENIZER_DIR } from "./support/tiny-tokenizer.js";
import { TINY_GPT2, TINY_LLAMA, randomWeights, writeHfFolder, writeKilnCheckpoint } from "./support/hf-folders.js";

const GPT2_TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"];

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-hf-export-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("exportHfFolder", () => {
  it("writes config.json, generation_config.json, model.safetensors (format pt) and a model card; the weights read back bit for bit", async () => {
    for (const model of [TINY_GPT2, TINY_LLAMA]) {
      const w = randomWeights(model);
      const ckpt = path.join(dir, `${model.arch}.safetensors`);
      await writeKilnCheckpoint(ckpt, model, w);
      await writeFile(path.join(dir, "metrics.jsonl"), '{"step":3,"loss":2.5}\n{"step":3,"val_loss":2.75}\n');
      const out = path.join(dir, `${model.arch}-hf`);
      expect(await exportHfFolder(ckpt, out)).toEqual(["config.json", "generation_config.json", "model.safetensors", ...GPT2_TOKENIZER_FILES, "README.md"]);
      expect((await readdir(out)).sort()).toEqual(["README.md", "config.json", "generation_config.json", "model.safetensors", ...GPT2_TOKENIZER_FILES].sort());
      const config = JSON.parse(await readFile(path.join(out, "config.json"), "utf8"));
      expect(modelConfigFromHf(config, "config.json")).toEqual(model);
      expect(config).toMatchObject({ architectures: [model.arch === "gpt2" ? "GPT2LMHeadModel" : "LlamaForCausalLM"], torch_dtype: "float32", eos_token_id: 50256 });
      expect(JSON.parse(await readFile(path.join(out, "generation_config.json"), "utf8"))).toMatchObject({ bos_token_id: 50256, eos_token_id: 50256 });
      const file = await readSafetensors(path.join(out, "model.safetensors"));
      expect(file.metadata).toEqual({ format: "pt" });
      const back = await PretrainedWeights.open(out);
      expect(await back.read()).toEqual(w);
      await back.close();
      const card = await readFile(path.join(out, "README.md"), "utf8");
      expect(card).toContain("| training steps | 3 |");
      expect(card).toContain("| final training loss | 2.5000 |");
      expect(card).toContain("| final validation loss | 2.7500 |");
    }
  });

  it("a checkpoint holding a folder tokenizer exports its files as they were, with its BOS and EOS in config.json", async () => {
    const t = await openTokenizer(TINY_TOKENIZER_DIR);
    const ckpt = path.join(dir, "c.safetensors");
    await writeKilnCheckpoint(ckpt, TINY_LLAMA, randomWeights(TINY_LLAMA), { [META_TOKENIZER]: t.name, [META_TOKENIZER_FILES]: JSON.stringify(t.files) });
    const out = path.join(dir, "out");
    expect(await exportHfFolder(ckpt, out)).toEqual(["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md"]);
    for (const name of ["tokenizer.json", "tokenizer_config.json"]) {
      expect(await readFile(path.join(out, name), "utf8")).toBe(await readFile(path.join(TINY_TOKENIZER_DIR, name), "utf8"));
    }
    expect(JSON.parse(await readFile(path.join(out, "config.json"), "utf8"))).toMatchObject({ bos_token_id: 276, eos_token_id: 276 });
    const card = await readFile(path.join(out, "README.md"), "utf8");
    expect(card).toContain(`| vocabulary | 40 tokens (tokenizer ${t.name}) |`);
    expect(card).toContain("The folder holds the tokenizer the training data was prepared with");
    // The exported folder opens with its tokenizer, as --init-from reads it.
    const back = await PretrainedWeights.open(out);
    expect(back.tokenizer).toBe(t.name.replace("tiny-bpe-tokenizer", "out"));
    expect(sameTokenizer(back.tokenizer!, t.name)).toBe(true);
    expect((await back.openTokenizer())?.encode("the cat")).toEqual(t.encode("the cat"));
    await back.close();
  });

  it("a gpt2-tokenized checkpoint exports GPT-2's tokenizer files: they encode as kiln's gpt2 and count as gpt2 for --init-from", async () => {
    const ckpt = path.join(dir, "c.safetensors");
    await writeKilnCheckpoint(ckpt, TINY_GPT2, randomWeights(TINY_GPT2));
    await exportHfFolder(ckpt, path.join(dir, "out"));
    const exported = await openTokenizer(path.join(dir, "out"));
    expect(sameTokenizer(exported.name, "gpt2")).toBe(true);
    expect(sameTokenizer(exported.name, "bytes")).toBe(false);
    const text = "Hello world! It's  a test:  naïve café — 日本語 12345 3.14159\n\n\tTabs   and spaces. I'll we've 🎉 emoji";
    expect(exported.encode(text)).toEqual((await getTokenizer("gpt2")).encode(text));
    expect([exported.vocabSize, exported.endOfText]).toEqual([50257, 50256]);
    expect(await readFile(path.join(dir, "out", "README.md"), "utf8")).toContain("The folder holds the tokenizer the training data was prepared with");
    // The hash kiln recognises as gpt2 is the one export writes.
    expect(tokenizerIdentity("x", (await gpt2TokenizerFiles())["tokenizer.json"]!)).toBe(`x@sha256:${BUILTIN_TOKENIZER_JSON_HASHES.gpt2}`);
  });

  it("a cl100k-tokenized checkpoint's card says its tokenizer has no files; an HF folder without tokenizer.json has no tokenizer", async () => {
    const ckpt = path.join(dir, "c.safetensors");
    await writeKilnCheckpoint(ckpt, TINY_GPT2, randomWeights(TINY_GPT2), { [META_TOKENIZER]: "cl100k" });
    expect(await exportHfFolder(ckpt, path.join(dir, "out"))).not.toContain("tokenizer.json");
    expect(await readFile(path.join(dir, "out", "README.md"), "utf8")).toContain("not for cl100k. Encode input as it does (tiktoken's cl100k_base).");
    await writeHfFolder(path.join(dir, "hf"), TINY_GPT2, randomWeights(TINY_GPT2));
    const hf = await PretrainedWeights.open(path.join(dir, "hf"));
    expect(hf.tokenizer).toBeUndefined();
    await hf.close();
  });

  it("--dtype bf16 rounds each weight to nearest even and says so in config.json", async () => {
    const w = randomWeights(TINY_LLAMA);
    await writeKilnCheckpoint(path.join(dir, "c.safetensors"), TINY_LLAMA, w);
    await exportHfFolder(path.join(dir, "c.safetensors"), path.join(dir, "out"), "bf16");
    const file = await readSafetensors(path.join(dir, "out", "model.safetensors"));
    const t = file.tensors.get("model.norm.weight")!;
    expect(t.dtype).toBe("BF16");
    const stored = new Uint16Array(t.data.slice().buffer);
    expect(Array.from(stored, bf16ToF32)).toEqual(Array.from(w.get("model.norm.weight")!, (x) => bf16ToF32(f32ToBf16(x))));
    expect(JSON.parse(await readFile(path.join(dir, "out", "config.json"), "utf8")).torch_dtype).toBe("bfloat16");
  });

  it("refuses a non-empty output folder and a damaged checkpoint, leaving nothing behind", async () => {
    const w = randomWeights(TINY_GPT2);
    await writeKilnCheckpoint(path.join(dir, "c.safetensors"), TINY_GPT2, w);
    await mkdir(path.join(dir, "taken"));
    await writeFile(path.join(dir, "taken", "keep.txt"), "x");
    const err = await exportHfFolder(path.join(dir, "c.safetensors"), path.join(dir, "taken")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointError);
    expect((err as CheckpointError).message).toBe("the output folder already exists and is not empty");
    expect(await readdir(path.join(dir, "taken"))).toEqual(["keep.txt"]);

    await writeFile(path.join(dir, "bad.safetensors"), "not a checkpoint at all");
    await expect(exportHfFolder(path.join(dir, "bad.safetensors"), path.join(dir, "out"))).rejects.toBeInstanceOf(CheckpointError);
    expect((await readdir(dir)).sort()).toEqual(["bad.safetensors", "c.safetensors", "taken"]);
  });

  it("a folder whose writing fails part way does not appear, and no staging folder stays", async () => {
    const failing = writeDirectoryAtomically(path.join(dir, "out"), async (staging) => {
      await writeFile(path.join(staging, "config.json"), "{}");
      throw new Error("disk gone");
    });
    await expect(failing).rejects.toThrow("disk gone");
    expect(await readdir(dir)).toEqual([]);
  });
});
