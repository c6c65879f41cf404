import { mkdtemp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckpointError } from "@kiln/contract";
import { type GgufValue, decodeGgml, encodeGgml, interleaveRopeRows, readGgufHeader, writeGguf } from "../src/gguf/index.js";

// kiln's GGUF reader and writer against a file llama.cpp's own Python writer (the gguf
// package) wrote: tooling/fixtures/gguf_fixture.py, whose values these tests rebuild.
const REFERENCE = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "gguf", "reference.gguf");

/** (i - n/2) * scale as f32, as gguf_fixture.py makes them. */
const values = (n: number, scale: number) => Float32Array.from({ length: n }, (_, i) => Math.fround(Math.fround(i - n / 2) * Math.fround(scale)));

const METADATA: [string, GgufValue][] = [
  ["general.architecture", { type: "string", value: "llama" }],
  ["test.u32", { type: "u32", value: 4000000000 }],
  ["test.i32", { type: "i32", value: -7 }],
  ["test.f32", { type: "f32", value: 0.25 }],
  ["test.bool", { type: "bool", value: true }],
  ["test.string", { type: "string", value: "héllo" }],
  ["test.u64", { type: "u64", value: 2n ** 40n + 3n }],
  ["test.f64", { type: "f64", value: 1 / 3 }],
  ["test.u8", { type: "u8", value: 200 }],
  ["test.i16", { type: "i16", value: -300 }],
  ["test.strings", { type: "array", itemType: "string", values: ["a", "", "Ġb"] }],
  ["test.ints", { type: "array", itemType: "i32", values: [1, -2, 3] }],
];

/** The fixture's tensors: name, ggml ne (row length first), type, f32 values before encoding. */
const TENSORS = [
  { name: "t.f32", ne: [4, 3], type: "f32" as const, values: values(12, 0.5) },
  { name: "t.f16", ne: [4, 2], type: "f16" as const, values: values(8, 0.125) },
  { name: "t.bf16", ne: [3, 2], type: "bf16" as const, values: values(6, 0.75) },
  { name: "t.q8_0", ne: [64, 2], type: "q8_0" as const, values: values(128, 0.01) },
];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "kiln-gguf-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("GGUF files", () => {
  it("reads the gguf package's file: every metadata type, tensor infos, data at aligned offsets", async () => {
    const g = await readGgufHeader(REFERENCE);
    expect(g.version).toBe(3);
    expect([...g.metadata]).toEqual(METADATA);
    expect(g.tensors.map(({ name, ne, type }) => ({ name, ne, type }))).toEqual(TENSORS.map(({ name, ne, type }) => ({ name, ne, type })));
    const bytes = new Uint8Array(await readFile(REFERENCE));
    for (const [i, t] of g.tensors.entries()) {
      expect(t.offset % 32).toBe(0);
      const data = bytes.subarray(t.offset, t.offset + t.bytes);
      // The file's bytes are kiln's encoding of the same values (f16 and bf16 rounding, ggml's q8_0).
      expect(data).toEqual(encodeGgml(TENSORS[i].values, TENSORS[i].type));
      const decoded = decodeGgml(data, t.type, TENSORS[i].values.length);
      const tol = { f32: 0, f16: 1e-3, bf16: 1e-2, q8_0: 0.01 }[t.type];
      for (let j = 0; j < decoded.length; j++) expect(Math.abs(decoded[j] - TENSORS[i].values[j])).toBeLessThanOrEqual(tol * Math.max(1, Math.abs(TENSORS[i].values[j])));
    }
  });

  it("writes the same file byte for byte from the same metadata and tensors", async () => {
    const out = path.join(dir, "kiln.gguf");
    await writeGguf(out, new Map(METADATA), TENSORS.map((t) => ({ name: t.name, ne: t.ne, type: t.type, data: encodeGgml(t.values, t.type) })));
    expect(new Uint8Array(await readFile(out))).toEqual(new Uint8Array(await readFile(REFERENCE)));
  });

  it("quantizes q8_0 as ggml defines it: d = max|x| / 127 in f16, q = round(x / d)", () => {
    const x = Float32Array.from({ length: 32 }, (_, i) => (i === 5 ? -2.54 : i * 0.01));
    const bytes = encodeGgml(x, "q8_0");
    expect(bytes.length).toBe(34);
    const view = new DataView(bytes.buffer);
    expect(view.getInt8(2 + 5)).toBe(-127);
    expect(view.getInt8(2 + 10)).toBe(Math.round(0.1 / (2.54 / 127)));
    expect(Array.from(decodeGgml(bytes, "q8_0", 32)).map((v, i) => Math.abs(v - x[i]) <= 0.0101)).not.toContain(false);
  });

  it("refuses a truncated or corrupt file, naming the byte offset", async () => {
    const bytes = new Uint8Array(await readFile(REFERENCE));
    const refusal = async (file: string) => {
      const err = await readGgufHeader(file).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(CheckpointError);
      return err as CheckpointError;
    };
    const cut = path.join(dir, "cut.gguf");
    await writeFile(cut, bytes);
    await truncate(cut, 700);
    expect((await refusal(cut)).message).toMatch(/tensor t\.bf16 \(12 bytes from byte 704\) runs past the end of the file \(700 bytes\)/);
    await truncate(cut, 100);
    const inHeader = await refusal(cut);
    expect(inHeader.where).toMatch(/cut\.gguf \(byte \d+\)/);
    expect(inHeader.message).toMatch(/the file ends at byte 100/);
    const bad = path.join(dir, "bad.gguf");
    await writeFile(bad, Uint8Array.from([...bytes.subarray(0, 4)].map((b) => b ^ 1)));
    expect((await refusal(bad)).where).toBe(`${bad} (byte 0)`);
    const type = bytes.slice();
    // test.u32's value type, after the magic, version, counts and "general.architecture" = "llama".
    const at = 24 + 8 + "general.architecture".length + 4 + 8 + "llama".length + 8 + "test.u32".length;
    new DataView(type.buffer).setUint32(at, 99, true);
    await writeFile(bad, type);
    const unknown = await refusal(bad);
    expect(unknown.where).toBe(`${bad} (byte ${at})`);
    expect(unknown.message).toMatch(/value type 99 is not one GGUF defines/);
  });
});

describe("llama.cpp's RoPE row layout", () => {
  it("interleaves each head's halves: rows (i, i + D/2) become (2i, 2i + 1)", () => {
    // 2 heads of D = 4, rows of 2 columns: head h row r holds [10h + r, -(10h + r)].
    const w = Float32Array.from({ length: 16 }, (_, k) => (k % 2 ? -1 : 1) * (10 * Math.floor(k / 8) + (Math.floor(k / 2) % 4)));
    const rows = (a: Float32Array) => Array.from({ length: a.length / 2 }, (_, r) => a[2 * r]);
    expect(rows(interleaveRopeRows(w, 2, 2))).toEqual([0, 2, 1, 3, 10, 12, 11, 13]);
  });
});
