import { describe, expect, it } from "vitest";
import { CheckpointError } from "@kiln/contract";
import { decodeSafetensors, parseSafetensorsHeader } from "../src/index.js";
import { concat, rawSafetensors, u64le } from "./safetensors-fixtures.js";

const FILE = "ckpt/model.safetensors";

function parse(bytes: Uint8Array) {
  return parseSafetensorsHeader(bytes, { fileName: FILE });
}

/** The CheckpointError that parsing `bytes` throws. */
function failure(bytes: Uint8Array): CheckpointError {
  try {
    parse(bytes);
  } catch (err) {
    expect(err).toBeInstanceOf(CheckpointError);
    const e = err as CheckpointError;
    expect(e.where).toContain(FILE);
    expect(e.hint).toBeTruthy();
    return e;
  }
  throw new Error("expected the header to be refused");
}

const entry = (dtype: string, shape: number[], begin: number, end: number) => ({ dtype, shape, data_offsets: [begin, end] });

describe("parseSafetensorsHeader accepts", () => {
  it("a valid header with metadata, padding and trailing whitespace", () => {
    const header = { __metadata__: { format: "pt" }, b: entry("F16", [2], 8, 12), a: entry("F32", [2], 0, 8) };
    const parsed = parse(rawSafetensors(header, new Uint8Array(12), 5));
    expect([...parsed.tensors.keys()]).toEqual(["a", "b"]); // data order
    expect(parsed.metadata).toEqual({ format: "pt" });
    expect(parsed.dataLength).toBe(12);
  });

  it("zero-size tensors anywhere, including several at one offset and at the end", () => {
    const header = {
      e1: entry("F32", [0], 0, 0),
      a: entry("U8", [4], 0, 4),
      e2: entry("I64", [3, 0], 4, 4),
      e3: entry("BF16", [0, 9], 4, 4),
    };
    const parsed = parse(rawSafetensors(header, new Uint8Array(4)));
    expect(parsed.tensors.size).toBe(4);
  });

  it("a header only (no data needed in `bytes` when fileSize is given)", () => {
    const full = rawSafetensors({ a: entry("F32", [4], 0, 16) }, new Uint8Array(16));
    const parsed = parseSafetensorsHeader(full.subarray(0, full.byteLength - 16), { fileName: FILE, fileSize: full.byteLength });
    expect(parsed.tensors.get("a")?.byteLength).toBe(16);
  });

  it("an empty header and null metadata", () => {
    expect(parse(rawSafetensors({})).tensors.size).toBe(0);
    expect(parse(rawSafetensors({ __metadata__: null })).metadata).toEqual({});
  });
});

describe("parseSafetensorsHeader refuses", () => {
  it("files shorter than the length field", () => {
    expect(failure(new Uint8Array(5)).message).toMatch(/too short/);
  });

  it("a header length over 100 MB, or past the end of the file", () => {
    expect(failure(concat(u64le(2n ** 63n), new Uint8Array(4))).message).toMatch(/over the 100000000-byte limit/);
    expect(failure(concat(u64le(100_000_001), new Uint8Array(4))).message).toMatch(/limit/);
    expect(failure(concat(u64le(40), new TextEncoder().encode("{}"))).message).toMatch(/only 2 bytes follow/);
  });

  it("headers that are not a UTF-8 JSON object", () => {
    expect(failure(rawSafetensors("[1,2]")).message).toMatch(/does not start with "\{"/);
    expect(failure(rawSafetensors(' {"a":1}')).message).toMatch(/does not start/);
    expect(failure(concat(u64le(4), new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]))).message).toMatch(/UTF-8/);
    expect(failure(rawSafetensors('{"a":')).message).toMatch(/not valid JSON/);
    expect(failure(rawSafetensors("{}\u0000")).message).toMatch(/not valid JSON/);
  });

  it("unknown and sub-byte dtypes, naming the tensor", () => {
    const e = failure(rawSafetensors({ "layer.w": entry("F4", [2], 0, 1) }, new Uint8Array(1)));
    expect(e.where).toBe(`${FILE} (tensor "layer.w")`);
    expect(e.message).toMatch(/dtype "F4" is not one kiln reads/);
    expect(failure(rawSafetensors({ w: entry("f32", [1], 0, 4) }, new Uint8Array(4))).message).toMatch(/dtype "f32"/);
    expect(failure(rawSafetensors({ w: { shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4))).message).toMatch(/no dtype/);
  });

  it("bad shapes and offsets", () => {
    const bad = [
      [{ w: entry("F32", [-1], 0, 4) }, /shape\[0\] is number -1/],
      [{ w: entry("F32", [1.5], 0, 4) }, /shape\[0\]/],
      [{ w: { dtype: "F32", shape: "4", data_offsets: [0, 16] } }, /shape is the string/],
      [{ w: { dtype: "F32", shape: [1], data_offsets: [0] } }, /not a pair/],
      [{ w: { dtype: "F32", shape: [1], data_offsets: [0, "4"] } }, /end is the string/],
      [{ w: entry("F32", [1], 4, 0) }, /end before they begin/],
      [{ w: entry("F32", [2], 0, 4) }, /span 4 bytes, but shape \[2\] of F32 needs 8/],
      [{ w: entry("F32", [2 ** 40, 2 ** 40], 0, 4) }, /needs 4835703278458516698824704 bytes/],
      [{ w: { ...entry("F32", [1], 0, 4), extra: 1 } }, /unknown key "extra"/],
      [{ w: [1] }, /not an object/],
      [{ "": entry("F32", [1], 0, 4) }, /empty name/],
    ] as const;
    for (const [header, message] of bad) {
      expect(failure(rawSafetensors(header, new Uint8Array(4))).message).toMatch(message);
    }
  });

  it("overlaps, holes, trailing bytes and truncated data", () => {
    const overlap = failure(rawSafetensors({ a: entry("U8", [4], 0, 4), b: entry("U8", [4], 2, 6) }, new Uint8Array(6)));
    expect(overlap.message).toMatch(/overlap tensor "a"/);
    expect(overlap.where).toContain('tensor "b"');
    expect(failure(rawSafetensors({ a: entry("U8", [4], 0, 4), b: entry("U8", [4], 0, 4) }, new Uint8Array(4))).message).toMatch(
      /overlap/,
    );
    expect(failure(rawSafetensors({ a: entry("U8", [2], 2, 4) }, new Uint8Array(4))).message).toMatch(/2 unclaimed bytes at 0/);
    expect(failure(rawSafetensors({ a: entry("U8", [2], 0, 2) }, new Uint8Array(3))).message).toMatch(/1 bytes follow the last/);
    expect(failure(rawSafetensors({}, new Uint8Array(1))).message).toMatch(/follow the last/);
    expect(failure(rawSafetensors({ a: entry("U8", [8], 0, 8) }, new Uint8Array(5))).message).toMatch(/truncated/);
    // A zero-size tensor inside another one is an overlap too.
    expect(failure(rawSafetensors({ a: entry("U8", [4], 0, 4), z: entry("U8", [0], 2, 2) }, new Uint8Array(4))).message).toMatch(
      /overlap/,
    );
  });

  it("metadata that is not an object of strings", () => {
    expect(failure(rawSafetensors({ __metadata__: { step: 3 } })).message).toMatch(/key "step" is number 3/);
    expect(failure(rawSafetensors({ __metadata__: ["a"] })).message).toMatch(/must be an object/);
    expect(failure(rawSafetensors({ __metadata__: { a: { b: "c" } } })).where).toBe(`${FILE} (__metadata__)`);
  });

  it("duplicate keys, which JSON.parse would silently collapse", () => {
    const dupTensor = '{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}';
    expect(failure(rawSafetensors(dupTensor, new Uint8Array(1))).message).toMatch(/key "w" appears twice in the header/);
    const dupField = '{"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}';
    expect(failure(rawSafetensors(dupField, new Uint8Array(1))).message).toMatch(/key "dtype" appears twice in entry "w"/);
    const escaped = '{"a\\u0062":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"ab":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}';
    expect(failure(rawSafetensors(escaped)).message).toMatch(/key "ab" appears twice/);
  });

  it("decodeSafetensors reports the same faults", () => {
    expect(() => decodeSafetensors(new Uint8Array(3), "x.safetensors")).toThrow(CheckpointError);
  });
});
