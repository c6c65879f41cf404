import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BatchSampler, DEFAULT_BUILTIN_CORPUS_CHARS, builtinCorpus, generateStories, getTokenizer, openTokenDataset } from "@kiln/core";
import { memoryDataset, tokenizeDocuments } from "../src/page-dataset.js";

describe("the page's training data", () => {
  it("is the CLI's built-in corpus token for token, and its batches are the CLI's", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-web-corpus-"));
    try {
      const corpus = await builtinCorpus({ cacheDir: dir, tokenizer: "bytes" });
      const file = fs.readFileSync(corpus.path);
      const cli = new Uint32Array(file.buffer, file.byteOffset, file.byteLength / 4);
      const page = tokenizeDocuments(generateStories(1, DEFAULT_BUILTIN_CORPUS_CHARS), await getTokenizer("bytes"));
      expect(page.length).toBe(cli.length);
      expect(Buffer.from(page.buffer).equals(Buffer.from(cli.buffer, cli.byteOffset, cli.byteLength))).toBe(true);

      const options = { batchSize: 4, seqLen: 32, seed: 7, valFraction: 0.01, split: "train" as const };
      const dataset = await openTokenDataset(corpus.path, { vocabSize: 256 });
      const fromFile = new BatchSampler(dataset, options);
      const fromPage = new BatchSampler(memoryDataset("builtin", page), options);
      for (let i = 0; i < 3; i++) {
        const [a, b] = [await fromFile.next(), await fromPage.next()];
        expect(b.ids).toEqual(a.ids);
        expect(b.targets).toEqual(a.targets);
      }
      await dataset.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("starts each document with <|endoftext|> where the tokenizer has one", async () => {
    const gpt2 = await getTokenizer("gpt2");
    const tokens = tokenizeDocuments(["Hello there.", "", "Bye."], gpt2);
    expect([...tokens]).toEqual([gpt2.endOfText!, ...gpt2.encode("Hello there."), gpt2.endOfText!, ...gpt2.encode("Bye.")]);
  });
});
