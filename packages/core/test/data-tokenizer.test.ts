import { describe, expect, it } from "vitest";
import { ConfigError } from "@kiln/contract";
import { TOKENIZER_NAMES, getTokenizer } from "../src/data/index.js";

const TEXT = "Once upon a time, a little fox named Pip found a shiny stone.\n\"Look!\" she said. Ça coûte 12,50 € — 日本語もOK 🦊.\n\n  Indented <|endoftext|> text.";

describe("tokenizers", () => {
  it.each(TOKENIZER_NAMES)("%s round-trips text, special-token strings included, with ids below its vocab size", async (name) => {
    const tokenizer = await getTokenizer(name);
    expect(tokenizer.name).toBe(name);
    const ids = tokenizer.encode(TEXT);
    expect(ids.length).toBeGreaterThan(10);
    expect(Math.max(...ids)).toBeLessThan(tokenizer.vocabSize);
    expect(ids).not.toContain(tokenizer.endOfText);
    expect(tokenizer.decode(ids)).toBe(TEXT);
  });

  it("has the vocabulary sizes and end-of-text ids of tiktoken's encodings", async () => {
    const sizes = await Promise.all(TOKENIZER_NAMES.map(async (n) => [n, (await getTokenizer(n)).vocabSize, (await getTokenizer(n)).endOfText]));
    expect(sizes).toEqual([
      ["gpt2", 50257, 50256],
      ["cl100k", 100277, 100257],
      ["o200k", 200019, 199999],
      ["bytes", 256, undefined],
    ]);
  });

  it("covers every special id of cl100k and o200k (the library's vocabularySize counts tokens, not ids)", async () => {
    const cl100k = await getTokenizer("cl100k");
    expect(cl100k.decode([100276])).toBe("<|endofprompt|>");
    expect(cl100k.decode([cl100k.endOfText!])).toBe("<|endoftext|>");
    const o200k = await getTokenizer("o200k");
    expect(o200k.decode([o200k.endOfText!])).toBe("<|endoftext|>");
  });

  it("gpt2 gives GPT-2's ids", async () => {
    const gpt2 = await getTokenizer("gpt2");
    expect(gpt2.encode("Hello world")).toEqual([15496, 995]);
    expect(gpt2.decode([50256])).toBe("<|endoftext|>");
  });

  it("bytes encodes UTF-8 bytes one per token", async () => {
    const bytes = await getTokenizer("bytes");
    expect(bytes.encode("aé")).toEqual([97, 0xc3, 0xa9]);
  });

  it("refuses an unknown name and lists the known ones", async () => {
    await expect(getTokenizer("llama3")).rejects.toThrow(ConfigError);
    await expect(getTokenizer("llama3")).rejects.toMatchObject({ hint: "Use one of: gpt2, cl100k, o200k, bytes." });
  });
});
