import { cp, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { DataError } from "@kiln/contract";
import { getTokenizer, openTokenDataset, openTokenizer, readDataSidecar, tokenizeFiles } from "../src/data/index.js";
import { tempDir } from "./data-fixtures.js";
import { TINY_TOKENIZER_DIR } from "./support/tiny-tokenizer.js";

async function readIds(file: string): Promise<number[]> {
  const bytes = await readFile(file);
  return Array.from(new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
}

describe("tokenizeFiles", () => {
  it("writes u32 tokens, each document after <|endoftext|>, and a sidecar", async () => {
    const dir = await tempDir();
    const a = path.join(dir, "a.txt");
    const b = path.join(dir, "b.txt");
    await writeFile(a, "Hello world");
    await writeFile(b, "Once upon a time");
    const gpt2 = await getTokenizer("gpt2");
    const out = path.join(dir, "out.bin");
    const sidecar = await tokenizeFiles({ files: [a, b], output: out, tokenizer: gpt2, valFraction: 0.05 });

    const expected = [50256, ...gpt2.encode("Hello world"), 50256, ...gpt2.encode("Once upon a time")];
    expect(await readIds(out)).toEqual(expected);
    expect(sidecar).toEqual({ tokenizer: "gpt2", vocab_size: 50257, tokens: expected.length, val_fraction: 0.05, sources: [a, b], format: "u32" });
    expect(await readDataSidecar(out)).toEqual(sidecar);
    const data = await openTokenDataset(out, { vocabSize: 50257 });
    expect(data.tokenCount).toBe(expected.length);
    await data.close();
    expect((await readdir(dir)).sort()).toEqual(["a.txt", "b.txt", "out.bin", "out.bin.json"]);
  });

  it("gives the same ids as tokenizing the whole text at once, for inputs larger than one piece", async () => {
    const dir = await tempDir();
    const line = (i: number) => `Line ${i}: the quick brown fox jumps over the lazy dog, ünïcödé 🦊 and "quotes".\n${i % 7 === 0 ? "\n   indented\n" : ""}`;
    const text = Array.from({ length: 40_000 }, (_, i) => line(i)).join("");
    expect(text.length).toBeGreaterThan(3 << 20);
    const file = path.join(dir, "big.txt");
    await writeFile(file, text);
    const cl100k = await getTokenizer("cl100k");
    const out = path.join(dir, "big.bin");
    await tokenizeFiles({ files: [file], output: out, tokenizer: cl100k });
    expect(await readIds(out)).toEqual([100257, ...cl100k.encode(text)]);
  });

  it("a tokenizer that prefixes the text it encodes (ByteLevel add_prefix_space) gets the whole document's ids too", async () => {
    const dir = await tempDir();
    const folder = path.join(dir, "prefixing");
    await cp(TINY_TOKENIZER_DIR, folder, { recursive: true });
    const json = JSON.parse(await readFile(path.join(folder, "tokenizer.json"), "utf8"));
    json.pre_tokenizer.add_prefix_space = true;
    await writeFile(path.join(folder, "tokenizer.json"), JSON.stringify(json));
    const prefixing = await openTokenizer(folder);
    expect(prefixing.prefixesText).toBe(true);
    expect((await openTokenizer(TINY_TOKENIZER_DIR)).prefixesText).toBe(false);
    const text = Array.from({ length: 80_000 }, (_, i) => `the cat ${i} sat on the mat.\n`).join("");
    expect(text.length).toBeGreaterThan(2 << 20);
    const file = path.join(dir, "big.txt");
    await writeFile(file, text);
    const out = path.join(dir, "big.bin");
    await tokenizeFiles({ files: [file], output: out, tokenizer: prefixing });
    expect(await readIds(out)).toEqual([276, ...prefixing.encode(text)]);
  });

  it("reports progress by bytes read", async () => {
    const dir = await tempDir();
    const file = path.join(dir, "a.txt");
    await writeFile(file, "abc ".repeat(1000));
    const seen: number[] = [];
    await tokenizeFiles({ files: [file], output: path.join(dir, "o.bin"), tokenizer: await getTokenizer("bytes"), onProgress: (p) => seen.push(p.bytesRead / p.bytesTotal) });
    expect(seen.at(-1)).toBe(1);
  });

  it("refuses input with no text and leaves nothing behind", async () => {
    const dir = await tempDir();
    const empty = path.join(dir, "empty.txt");
    await writeFile(empty, "");
    const err = await tokenizeFiles({ files: [empty], output: path.join(dir, "o.bin"), tokenizer: await getTokenizer("gpt2") }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataError);
    expect((err as DataError).message).toMatch(/the input holds no text/);
    expect(await readdir(dir)).toEqual(["empty.txt"]);
  });

  it("refuses a missing input file before writing anything", async () => {
    const dir = await tempDir();
    const missing = path.join(dir, "missing.txt");
    const err = await tokenizeFiles({ files: [missing], output: path.join(dir, "o.bin"), tokenizer: await getTokenizer("bytes") }).catch((e: unknown) => e);
    expect(err).toMatchObject({ message: "input file not found", where: missing });
    expect(await readdir(dir)).toEqual([]);
  });

  it("refuses an output directory that does not exist", async () => {
    const dir = await tempDir();
    const input = path.join(dir, "a.txt");
    await writeFile(input, "some text");
    const out = path.join(dir, "no", "such", "dir", "o.bin");
    const err = await tokenizeFiles({ files: [input], output: out, tokenizer: await getTokenizer("bytes") }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataError);
    expect((err as DataError).message).toBe("cannot write token file: output directory does not exist");
  });

  it("stops on abort and leaves no partial file, keeping an older file intact", async () => {
    const dir = await tempDir();
    const input = path.join(dir, "a.txt");
    await writeFile(input, "word ".repeat(600_000));
    const out = path.join(dir, "o.bin");
    await writeFile(out, "old");
    const controller = new AbortController();
    const err = await tokenizeFiles({
      files: [input],
      output: out,
      tokenizer: await getTokenizer("bytes"),
      signal: controller.signal,
      onProgress: () => controller.abort(new Error("interrupted")),
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ message: "interrupted" });
    expect((await readdir(dir)).sort()).toEqual(["a.txt", "o.bin"]);
    expect(await readFile(out, "utf8")).toBe("old");
  });
});
