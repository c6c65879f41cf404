import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { DataError } from "@kiln/contract";
import { LLMC_U16_MAGIC, encodeLlmcHeader, openTokenDataset } from "../src/data/index.js";
import { dataRefusal, tempDir, u16ShardBytes, u32Bytes, writeU32File } from "./data-fixtures.js";

function openError(file: string, vocabSize = 1000): Promise<DataError> {
  return dataRefusal(openTokenDataset(file, { vocabSize }));
}

describe("token file formats", () => {
  it("reads a headerless file as raw little-endian u32 tokens", async () => {
    const dir = await tempDir();
    const file = await writeU32File(dir, "raw.bin", [5, 0, 999, 7, 65535, 70000]);
    const data = await openTokenDataset(file, { vocabSize: 70001 });
    expect(data.format).toBe("u32");
    expect(data.tokenCount).toBe(6);
    const into = new Int32Array(4);
    await data.read(2, 4, into);
    expect([...into]).toEqual([999, 7, 65535, 70000]);
    await data.close();
  });

  it("round-trips an llm.c u16 shard built by hand", async () => {
    const dir = await tempDir();
    const ids = [50256, 15496, 11, 995, 0, 1, 65535, 42];
    const file = path.join(dir, "shard.bin");
    const bytes = u16ShardBytes(ids);
    const header = new DataView(bytes.buffer, 0, 12);
    expect([header.getInt32(0, true), header.getInt32(4, true), header.getInt32(8, true)]).toEqual([20240520, 1, ids.length]);
    await writeFile(file, bytes);

    const data = await openTokenDataset(file, { vocabSize: 65536 });
    expect(data.format).toBe("llmc-u16");
    expect(data.tokenCount).toBe(ids.length);
    const all = new Int32Array(ids.length);
    await data.read(0, ids.length, all);
    expect([...all]).toEqual(ids);
    // an unaligned window into a longer array: widening in place leaves the rest alone
    const window = new Int32Array(6).fill(-7);
    await data.read(3, 5, window);
    expect([...window]).toEqual([995, 0, 1, 65535, 42, -7]);
    await data.close();
  });

  it("reads llm.c's u32 shards (magic 20240801, version 7)", async () => {
    const dir = await tempDir();
    const ids = [128000, 9906, 1917, 128001];
    const file = path.join(dir, "llama.bin");
    await writeFile(file, Buffer.concat([encodeLlmcHeader(ids.length, 4), u32Bytes(ids)]));
    const data = await openTokenDataset(file, { vocabSize: 128256 });
    expect(data.format).toBe("llmc-u32");
    const into = new Int32Array(4);
    await data.read(0, 4, into);
    expect([...into]).toEqual(ids);
    await data.close();
  });

  it("refuses a headerless file whose size is not a multiple of 4, naming the file", async () => {
    const dir = await tempDir();
    const file = path.join(dir, "odd.bin");
    await writeFile(file, new Uint8Array(10));
    const err = await openError(file);
    expect(err.message).toBe("odd.bin: data size 10 is not a multiple of 4 bytes: not a u32 token file");
    expect(err.where).toBe(file);
  });

  it("reports the first token id >= vocab_size with its position, the largest id and what to do", async () => {
    const dir = await tempDir();
    const ids = Array.from({ length: 3000 }, (_, i) => i % 100);
    ids[1234] = 50300;
    ids[2000] = 50400;
    const file = await writeU32File(dir, "big-ids.bin", ids);
    const err = await openError(file, 50257);
    expect(err.message).toMatch(/token id 50300 at position 1234 is not below the model's vocab_size 50257; the largest id in the file is 50400/);
    expect(err.hint).toMatch(/re-run kiln prepare with the model's tokenizer or raise model\.vocab_size \(to at least 50401\)/);
    expect(err.where).toBe(file);
  });

  it("finds an out-of-range id that lies beyond the first scan chunk, and ids >= 2^31", async () => {
    const dir = await tempDir();
    const ids = new Uint32Array((1 << 20) + 10);
    ids[(1 << 20) + 3] = 0xfffffff0;
    const file = await writeU32File(dir, "late.bin", ids);
    const err = await openError(file, 10);
    expect(err.message).toMatch(new RegExp(`token id ${0xfffffff0} at position ${(1 << 20) + 3}`));
  });

  it("refuses an empty file", async () => {
    const dir = await tempDir();
    const file = path.join(dir, "empty.bin");
    await writeFile(file, new Uint8Array(0));
    const err = await openError(file);
    expect(err.message).toMatch(/empty\.bin is empty/);
  });

  it("refuses a missing file and says how to make one", async () => {
    const dir = await tempDir();
    const file = path.join(dir, "nope.bin");
    const err = await openError(file);
    expect(err.message).toBe("token file not found");
    expect(err.where).toBe(file);
    expect(err.hint).toMatch(/kiln prepare/);
  });

  it("refuses an llm.c shard whose header token count does not match its size", async () => {
    const dir = await tempDir();
    const file = path.join(dir, "short.bin");
    await writeFile(file, u16ShardBytes([1, 2, 3, 4], 6));
    const err = await openError(file);
    expect(err.message).toBe("short.bin: header says 6 tokens (12 bytes) but the file holds 8 bytes of tokens (4 tokens)");
  });

  it("refuses an llm.c shard of an unknown version, a cut-off header, odd data and zero tokens", async () => {
    const dir = await tempDir();
    const v2 = path.join(dir, "v2.bin");
    const bytes = u16ShardBytes([1, 2]);
    new DataView(bytes.buffer).setInt32(4, 2, true);
    await writeFile(v2, bytes);
    expect((await openError(v2)).message).toMatch(/version 2, which kiln does not read/);

    const cut = path.join(dir, "cut.bin");
    await writeFile(cut, u16ShardBytes([1, 2]).subarray(0, 100));
    expect((await openError(cut)).message).toMatch(new RegExp(`magic ${LLMC_U16_MAGIC} but ends at byte 100, inside its 1024-byte header`));

    const odd = path.join(dir, "odd.bin");
    await writeFile(odd, u16ShardBytes([1, 2]).subarray(0, 1024 + 3));
    expect((await openError(odd)).message).toMatch(/data size 3 after the header is not a multiple of 2 bytes/);

    const none = path.join(dir, "none.bin");
    await writeFile(none, u16ShardBytes([]));
    expect((await openError(none)).message).toMatch(/shard with no tokens/);
  });

  it("refuses a token file whose sidecar disagrees with it", async () => {
    const dir = await tempDir();
    const file = await writeU32File(dir, "x.bin", [1, 2, 3]);
    const sidecar = { tokenizer: "bytes", vocab_size: 256, tokens: 4, val_fraction: 0.01, sources: ["a.txt"], format: "u32" };
    await writeFile(`${file}.json`, JSON.stringify(sidecar));
    expect((await openError(file)).message).toBe("x.bin holds 3 tokens but its sidecar says 4");
    await writeFile(`${file}.json`, JSON.stringify({ ...sidecar, tokens: 3 }));
    const data = await openTokenDataset(file, { vocabSize: 256 });
    expect(data.sidecar).toEqual({ ...sidecar, tokens: 3 });
    await data.close();
  });

  it("rejects reads outside the file", async () => {
    const dir = await tempDir();
    const data = await openTokenDataset(await writeU32File(dir, "r.bin", [1, 2, 3]), { vocabSize: 10 });
    await expect(data.read(2, 2, new Int32Array(2))).rejects.toThrow(RangeError);
    await data.close();
  });
});
