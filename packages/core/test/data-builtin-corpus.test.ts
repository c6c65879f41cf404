import { readFile, stat } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { StoryRandom, builtinCorpus, generateStories, generateStory, getTokenizer, openTokenDataset } from "../src/data/index.js";
import { tempDir } from "./data-fixtures.js";

describe("built-in story corpus", () => {
  it("is the same text for the same seed and different for another", () => {
    const a = [...generateStories(1, 200_000)].join("");
    const b = [...generateStories(1, 200_000)].join("");
    const c = [...generateStories(2, 200_000)].join("");
    expect(a).toBe(b);
    expect(c).not.toBe(a);
    expect(a.length).toBeGreaterThanOrEqual(200_000);
  });

  it("reads as English sentences and varies from story to story", () => {
    const rng = new StoryRandom(5);
    const stories = Array.from({ length: 500 }, () => generateStory(rng));
    expect(new Set(stories).size).toBe(500);
    for (const story of stories.slice(0, 50)) {
      expect(story).toMatch(/^[A-Z][^]*[.!"]\n$/);
      expect(story).not.toMatch(/undefined|\{|\}| {2}|\.\./);
    }
    const words = new Set(stories.join(" ").toLowerCase().match(/[a-z']+/g));
    expect(words.size).toBeGreaterThan(400);
  });

  it("tokenizes a few megabytes on first use, then comes from the cache unchanged", async () => {
    const cacheDir = await tempDir();
    const gpt2 = await getTokenizer("gpt2");
    const first = await builtinCorpus({ cacheDir, tokenizer: gpt2 });
    expect(first.created).toBe(true);
    expect(first.sidecar).toMatchObject({ tokenizer: "gpt2", vocab_size: 50257, format: "u32", val_fraction: 0.01 });
    expect(first.sidecar.tokens).toBeGreaterThan(500_000);
    expect((await stat(first.path)).size).toBe(first.sidecar.tokens * 4);
    const bytes = await readFile(first.path);

    const second = await builtinCorpus({ cacheDir, tokenizer: "gpt2" });
    expect(second.created).toBe(false);
    expect(second.path).toBe(first.path);
    expect(second.sidecar).toEqual(first.sidecar);

    const data = await openTokenDataset(first.path, { vocabSize: 50257 });
    const head = new Int32Array(40);
    await data.read(0, 40, head);
    expect(head[0]).toBe(50256);
    expect(gpt2.decode(head.subarray(1))).toMatch(/^[A-Z]/);
    await data.close();

    const again = await builtinCorpus({ cacheDir: await tempDir(), tokenizer: gpt2 });
    expect(again.created).toBe(true);
    expect(Buffer.compare(await readFile(again.path), bytes)).toBe(0);
  });
});
