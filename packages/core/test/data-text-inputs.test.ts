import { open, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { DataError } from "@kiln/contract";
import { type SkippedInput, TokenFileWriter, getTokenizer, readAsU16Tokens, recognizeSignature, tokenizeFiles, u32PathFor } from "../src/data/index.js";
import { tempDir } from "./data-fixtures.js";

async function readIds(file: string): Promise<number[]> {
  const bytes = await readFile(file);
  return Array.from(new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
}

const bytes = (...b: (number | string)[]) => new Uint8Array(b.flatMap((x) => (typeof x === "string" ? [...Buffer.from(x, "latin1")] : [x])));

describe("recognizeSignature", () => {
  it("tells compressions and binary formats by their magic numbers, and text by none", () => {
    expect(recognizeSignature(gzipSync(Buffer.from("hi")))).toEqual({ compression: "gzip" });
    expect(recognizeSignature(bytes(0x28, 0xb5, 0x2f, 0xfd, 0))).toEqual({ compression: "zstd" });
    expect(recognizeSignature(bytes(0xfd, "7zXZ", 0))).toEqual({ compression: "xz" });
    expect(recognizeSignature(bytes(0x89, "PNG\r\n", 0x1a, 0x0a, 0))).toEqual({ binary: "a PNG image" });
    expect(recognizeSignature(bytes(0xff, 0xd8, 0xff, 0xe0))).toEqual({ binary: "a JPEG image" });
    expect(recognizeSignature(bytes("%PDF-1.7\n"))).toEqual({ binary: "a PDF document" });
    expect(recognizeSignature(bytes("PK", 3, 4, 20))).toMatchObject({ binary: expect.stringMatching(/^a zip archive/) });
    expect(recognizeSignature(bytes(0xff, 0xfe, "h", 0))).toMatchObject({ binary: expect.stringMatching(/^UTF-16 text/) });
    expect(recognizeSignature(bytes("Once upon a time"))).toBeUndefined();
    expect(recognizeSignature(bytes("GIF"))).toBeUndefined(); // too short for GIF87a/GIF89a
  });
});

describe("tokenizeFiles with inputs that are not text", () => {
  it("skips, through onNotText, a file found binary by its start, and one found binary after 64 KiB of text (its tokens taken back)", async () => {
    const dir = await tempDir();
    const text = path.join(dir, "a.txt");
    const png = path.join(dir, "b.png");
    const late = path.join(dir, "c.log");
    const last = path.join(dir, "d.txt");
    await writeFile(text, "The fox ran to the river.\n");
    await writeFile(png, bytes(0x89, "PNG\r\n", 0x1a, 0x0a, 0, 0, 0, 13));
    await writeFile(late, Buffer.concat([Buffer.from("plain log line\n".repeat(10_000)), Buffer.alloc(64)]));
    await writeFile(last, "The end.\n");
    const gpt2 = await getTokenizer("gpt2");
    const out = path.join(dir, "out.bin");
    const skipped: SkippedInput[] = [];
    const sidecar = await tokenizeFiles({ files: [text, png, late, last], output: out, tokenizer: gpt2, onNotText: (s) => skipped.push(s) });
    expect(skipped).toEqual([
      { file: png, reason: "a PNG image" },
      { file: late, reason: "binary data (it holds NUL bytes, the first at character 150001)" },
    ]);
    expect(await readIds(out)).toEqual([50256, ...gpt2.encode("The fox ran to the river.\n"), 50256, ...gpt2.encode("The end.\n")]);
    expect(sidecar.sources).toEqual([text, last]);
  });

  it("refuses such a file without onNotText, naming it, and writes nothing", async () => {
    const dir = await tempDir();
    const text = path.join(dir, "a.txt");
    const bin = path.join(dir, "b.gz");
    await writeFile(text, "Some text.\n");
    await writeFile(bin, gzipSync(Buffer.from(new Float64Array([1, 2, 3]).buffer)));
    const gpt2 = await getTokenizer("gpt2");
    const refused = tokenizeFiles({ files: [text, bin], output: path.join(dir, "out.bin"), tokenizer: gpt2 });
    await expect(refused).rejects.toThrow(DataError);
    await expect(refused).rejects.toMatchObject({ where: bin, message: expect.stringMatching(/^input file is not text: a gzip-compressed file holding binary data \(it holds NUL bytes/) });
    expect((await readdir(dir)).sort()).toEqual(["a.txt", "b.gz"]);
  });

  it("takes text in another encoding than UTF-8 for not text, and refuses when nothing is left", async () => {
    const dir = await tempDir();
    const latin1 = path.join(dir, "latin1.txt");
    await writeFile(latin1, Buffer.from("Café, crème brûlée, à la carte. ".repeat(20), "latin1"));
    const skipped: SkippedInput[] = [];
    const refused = tokenizeFiles({ files: [latin1], output: path.join(dir, "out.bin"), tokenizer: await getTokenizer("bytes"), onNotText: (s) => skipped.push(s) });
    await expect(refused).rejects.toMatchObject({ message: "no input file is text (1 skipped): nothing to tokenize" });
    expect(skipped[0].reason).toMatch(/^binary data or text in another encoding than UTF-8 \(100 of its first \d+ characters are not valid UTF-8/);
  });

  it("keeps a few stray invalid bytes in a text file (they become U+FFFD)", async () => {
    const dir = await tempDir();
    const file = path.join(dir, "a.txt");
    await writeFile(file, Buffer.concat([Buffer.from("x".repeat(500)), Buffer.from([0xff]), Buffer.from("y".repeat(500))]));
    const out = path.join(dir, "out.bin");
    const sidecar = await tokenizeFiles({ files: [file], output: out, tokenizer: await getTokenizer("bytes") });
    expect(sidecar.tokens).toBe(1003); // U+FFFD is 3 UTF-8 bytes
  });
});

describe("TokenFileWriter.truncate", () => {
  it("takes back staged and written tokens alike", async () => {
    const dir = await tempDir();
    const out = path.join(dir, "t.bin");
    const w = await TokenFileWriter.create(out, 4);
    await w.append([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]); // two flushes of 4, two staged
    await w.truncate(9);
    await w.append([90]);
    await w.truncate(3);
    await w.append([40, 50]);
    await w.commit();
    expect(await readIds(out)).toEqual([1, 2, 3, 40, 50]);
  });
});

describe("readAsU16Tokens", () => {
  async function reading(data: Uint8Array) {
    const dir = await tempDir();
    const file = path.join(dir, "x.bin");
    await writeFile(file, data);
    const handle = await open(file, "r");
    try {
      return await readAsU16Tokens(handle, data.byteLength, file);
    } finally {
      await handle.close();
    }
  }

  it("finds 16-bit ids in a headerless file, and not in a u32 one with ids up to 2^18", async () => {
    expect(await reading(new Uint8Array(new Uint16Array([464, 21831, 11687, 625, 262, 16931, 3290, 13]).buffer))).toEqual({ tokens: 8, maxId: 21831 });
    expect(await reading(new Uint8Array(new Uint32Array([464, 262_000, 11687, 200_019, 262, 3]).buffer))).toBeUndefined();
    expect(await reading(new Uint8Array(3))).toBeUndefined();
  });

  it("names the converted file after the input", () => {
    expect(u32PathFor("data/train.bin")).toBe("data/train-u32.bin");
    expect(u32PathFor("train")).toBe("train-u32.bin");
  });
});
