import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckpointError, f32ToBf16, f32ToF16 } from "@kiln/contract";
import {
  SAFETENSORS_DTYPES,
  decodeSafetensors,
  encodeSafetensors,
  fromSafetensorsDType,
  openSafetensors,
  readSafetensors,
  safetensorsDTypeSize,
  toSafetensorsDType,
  writeSafetensors,
  type SafetensorsTensorInput,
} from "../src/index.js";
import { patternBytes } from "./safetensors-fixtures.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-st-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** One tensor of every dtype, with awkward shapes: scalar, zero-size, odd lengths. */
function everyDTypeTensors(): SafetensorsTensorInput[] {
  const shapes: number[][] = [[], [0], [3], [2, 0, 5], [1, 7], [3, 1, 2]];
  const tensors: SafetensorsTensorInput[] = [];
  SAFETENSORS_DTYPES.forEach((dtype, d) => {
    shapes.forEach((shape, s) => {
      const bytes = shape.reduce((n, x) => n * x, 1) * safetensorsDTypeSize(dtype);
      tensors.push({ name: `t.${dtype}.${s}`, dtype, shape, data: patternBytes(bytes, 1 + d * 31 + s) });
    });
  });
  return tensors;
}

function expectSameTensors(
  got: Map<string, { dtype: string; shape: number[]; data: Uint8Array }>,
  want: SafetensorsTensorInput[],
): void {
  expect([...got.keys()].sort()).toEqual(want.map((t) => t.name).sort());
  for (const t of want) {
    const g = got.get(t.name)!;
    expect(g.dtype).toBe(t.dtype);
    expect(g.shape).toEqual(t.shape);
    expect(Buffer.from(g.data).equals(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))).toBe(true);
  }
}

describe("safetensors round trips", () => {
  it("every dtype, scalars and zero-size tensors survive encode/decode bit for bit", () => {
    const tensors = everyDTypeTensors();
    const decoded = decodeSafetensors(encodeSafetensors(tensors, { format: "pt", step: "12" }));
    expectSameTensors(decoded.tensors, tensors);
    expect(decoded.metadata).toEqual({ format: "pt", step: "12" });
  });

  it("every dtype survives writeSafetensors/readSafetensors and the lazy reader", async () => {
    const tensors = everyDTypeTensors();
    const file = path.join(dir, "all.safetensors");
    await writeSafetensors(file, tensors, { config: JSON.stringify({ n_layer: 2 }) });

    const whole = await readSafetensors(file);
    expectSameTensors(whole.tensors, tensors);
    expect(JSON.parse(whole.metadata.config!)).toEqual({ n_layer: 2 });

    const reader = await openSafetensors(file);
    try {
      expect(reader.metadata).toEqual(whole.metadata);
      const lazy = new Map();
      for (const name of reader.names) lazy.set(name, await reader.read(name));
      expectSameTensors(lazy, tensors);
    } finally {
      await reader.close();
    }
    expect(Buffer.from(await readFile(file)).equals(Buffer.from(encodeSafetensors(tensors, whole.metadata)))).toBe(true);
  });

  it("keeps float bit patterns exactly: NaN payloads, -0, subnormals, infinities", () => {
    const f32 = new Uint32Array([0x7fc00001, 0xffa00000, 0x80000000, 0x00000001, 0x7f800000, 0xff800000, 0x3f800000]);
    const f64 = new Float64Array([-0, Number.MIN_VALUE, NaN, -Infinity, Math.PI]);
    const bf16 = new Uint16Array([f32ToBf16(1.5), f32ToBf16(-3.25e-30), 0x7fc1, 0x8000]);
    const f16 = new Uint16Array([f32ToF16(65504), f32ToF16(6e-8), 0x7e01, 0xfc00]);
    const tensors: SafetensorsTensorInput[] = [
      { name: "f32", dtype: "F32", shape: [7], data: f32 },
      { name: "f64", dtype: "F64", shape: [5], data: f64 },
      { name: "bf16", dtype: "BF16", shape: [2, 2], data: bf16 },
      { name: "f16", dtype: "F16", shape: [4], data: f16 },
    ];
    const decoded = decodeSafetensors(encodeSafetensors(tensors));
    expectSameTensors(decoded.tensors, tensors);
    const back = decoded.tensors.get("f32")!.data;
    expect(Array.from(new Uint32Array(back.slice().buffer))).toEqual(Array.from(f32));
  });

  it("writes from views into larger buffers (non-zero byteOffset)", () => {
    const backing = patternBytes(64, 9);
    const view = new Float32Array(backing.buffer, 12, 5);
    const decoded = decodeSafetensors(encodeSafetensors([{ name: "w", dtype: "F32", shape: [5], data: view }]));
    expect(Array.from(decoded.tensors.get("w")!.data)).toEqual(Array.from(backing.subarray(12, 32)));
  });

  it("writes and reads a file with no tensors", async () => {
    const file = path.join(dir, "empty.safetensors");
    await writeSafetensors(file, []);
    const got = await readSafetensors(file);
    expect(got.tensors.size).toBe(0);
    expect(got.metadata).toEqual({});
    expect((await readFile(file)).byteLength % 8).toBe(0);
  });

  it("orders tensors by element size then name, and aligns each to its element size", () => {
    const tensors: SafetensorsTensorInput[] = [
      { name: "b", dtype: "U8", shape: [3], data: new Uint8Array(3) },
      { name: "layers.10", dtype: "F32", shape: [1], data: new Float32Array(1) },
      { name: "a", dtype: "F16", shape: [3], data: new Uint16Array(3) },
      { name: "layers.2", dtype: "F32", shape: [3], data: new Float32Array(3) },
      { name: "z", dtype: "F64", shape: [1], data: new Float64Array(1) },
    ];
    const bytes = encodeSafetensors(tensors);
    const decoded = decodeSafetensors(bytes);
    expect([...decoded.tensors.keys()]).toEqual(["z", "layers.10", "layers.2", "a", "b"]);
    for (const t of decoded.tensors.values()) {
      expect(t.data.byteOffset % safetensorsDTypeSize(t.dtype)).toBe(0);
    }
    // Same tensors in another order give the same bytes.
    expect(Buffer.from(encodeSafetensors([...tensors].reverse())).equals(Buffer.from(bytes))).toBe(true);
  });

  it("keeps unusual names and metadata keys intact", () => {
    const names = ["model.layers.0.self_attn.q_proj.weight", "__proto__", "naïve ☃", "😀", "\u0000", 'q"uote\\'];
    const tensors = names.map((name, i) => ({ name, dtype: "I32" as const, shape: [1], data: new Int32Array([i]) }));
    const metadata = JSON.parse('{"__proto__": "a", "1": "one", "": "empty key", "emoji": "😀"}') as Record<string, string>;
    const decoded = decodeSafetensors(encodeSafetensors(tensors, metadata));
    expect(new Set(decoded.tensors.keys())).toEqual(new Set(names));
    expect(decoded.metadata).toEqual(metadata);
    expect(Object.keys(decoded.metadata)).toContain("__proto__");
  });

  it("lazy reader: readInto, has, info, and a clear error for a missing name", async () => {
    const file = path.join(dir, "lazy.safetensors");
    const w = new Float32Array([1, 2, 3, 4]);
    await writeSafetensors(file, [{ name: "w", dtype: "F32", shape: [2, 2], data: w }]);
    const reader = await openSafetensors(file);
    try {
      expect(reader.has("w")).toBe(true);
      expect(reader.info("w")).toMatchObject({ dtype: "F32", shape: [2, 2], byteLength: 16 });
      const target = new Float32Array(4);
      await reader.readInto("w", target);
      expect(Array.from(target)).toEqual([1, 2, 3, 4]);
      await expect(reader.readInto("w", new Float32Array(3))).rejects.toThrow(CheckpointError);
      expect(() => reader.info("missing")).toThrow(/no tensor named "missing"/);
    } finally {
      await reader.close();
    }
  });

  it("maps kiln dtypes to safetensors names and back", () => {
    for (const d of ["f32", "bf16", "f16", "i32", "u32", "u16"] as const) {
      expect(fromSafetensorsDType(toSafetensorsDType(d))).toBe(d);
    }
    expect(fromSafetensorsDType("F64")).toBeUndefined();
  });

  it("reports a missing file as a CheckpointError naming it", async () => {
    const file = path.join(dir, "nope.safetensors");
    await expect(readSafetensors(file)).rejects.toMatchObject({ name: "CheckpointError", where: file });
    await expect(openSafetensors(file)).rejects.toMatchObject({ name: "CheckpointError", where: file });
  });
});
