// The writer's bytes checked against layouts written out by hand from the
// format's definition, not against our own reader.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { encodeSafetensors, writeSafetensors } from "../src/index.js";

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}

describe("safetensors byte layout", () => {
  it("one F32 tensor and metadata: length, JSON, space padding, data", async () => {
    const header = '{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}';
    expect(header.length).toBe(85); // padded with 3 spaces to 88
    const expected =
      "5800000000000000" + // 88, little-endian u64
      Buffer.from(header + "   ", "latin1").toString("hex") +
      "0000803f" + // 1.0f
      "000000c0"; // -2.0f

    const bytes = encodeSafetensors([{ name: "a", dtype: "F32", shape: [2], data: new Float32Array([1, -2]) }], {
      format: "pt",
    });
    expect(hex(bytes)).toBe(expected);

    const dir = await mkdtemp(path.join(tmpdir(), "kiln-st-layout-"));
    try {
      const file = path.join(dir, "a.safetensors");
      await writeSafetensors(file, [{ name: "a", dtype: "F32", shape: [2], data: new Float32Array([1, -2]) }], {
        format: "pt",
      });
      expect(hex(await readFile(file))).toBe(expected);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("mixed dtypes, a scalar and an empty tensor, no metadata", () => {
    // Order: larger elements first, then by name: "s" (I64 scalar), "w" (BF16), "e" (U8, empty), "m" (U8).
    const header =
      '{"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},' +
      '"w":{"dtype":"BF16","shape":[1,3],"data_offsets":[8,14]},' +
      '"e":{"dtype":"U8","shape":[0,4],"data_offsets":[14,14]},' +
      '"m":{"dtype":"U8","shape":[2],"data_offsets":[14,16]}}';
    const padded = header + " ".repeat((8 - (header.length % 8)) % 8);
    expect(padded.length % 8).toBe(0);
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(padded.length));
    const expected =
      length.toString("hex") +
      Buffer.from(padded, "latin1").toString("hex") +
      "feffffffffffffff" + // -2n as i64
      "803f" + "0040" + "80bf" + // bf16 1.0, 2.0, -1.0
      "0aff"; // u8 10, 255

    const bytes = encodeSafetensors([
      { name: "m", dtype: "U8", shape: [2], data: new Uint8Array([10, 255]) },
      { name: "e", dtype: "U8", shape: [0, 4], data: new Uint8Array(0) },
      { name: "w", dtype: "BF16", shape: [1, 3], data: new Uint16Array([0x3f80, 0x4000, 0xbf80]) },
      { name: "s", dtype: "I64", shape: [], data: new BigInt64Array([-2n]) },
    ]);
    expect(hex(bytes)).toBe(expected);
  });

  it("non-ASCII names: the length field counts UTF-8 bytes", () => {
    const header = '{"é":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}';
    const utf8 = Buffer.from(header, "utf8");
    expect(utf8.byteLength).toBe(header.length + 1);
    const padded = Buffer.concat([utf8, Buffer.alloc((8 - (utf8.byteLength % 8)) % 8, 0x20)]);
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(padded.byteLength));
    const bytes = encodeSafetensors([{ name: "é", dtype: "U8", shape: [1], data: new Uint8Array([7]) }]);
    expect(hex(bytes)).toBe(length.toString("hex") + padded.toString("hex") + "07");
  });
});
