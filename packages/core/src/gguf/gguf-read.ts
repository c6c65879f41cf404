import { open } from "node:fs/promises";
import { CheckpointError } from "@kiln/contract";
import { GGML_TYPES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE_TYPES, type GgufScalarType, type GgufTensor, type GgufValue, SCALAR_BYTES, alignUp, ggmlBytes, ggmlTypeOfCode } from "./gguf-format.js";

/** A tensor's place in the file: absolute byte offset and length. */
export interface GgufTensorInfo extends GgufTensor {
  offset: number;
  bytes: number;
}

export interface GgufContents {
  version: number;
  metadata: Map<string, GgufValue>;
  tensors: GgufTensorInfo[];
  /** Where the data section starts. */
  dataOffset: number;
}

/** Longest string or array a header may hold before it is called corrupt. */
const MOST_ITEMS = 1 << 28;

/**
 * The header of a GGUF file: metadata and tensor infos, each tensor checked to lie inside
 * the file. A bad magic, an unknown type, a count or length past the file, or a
 * truncated file is refused naming the byte offset where reading failed.
 */
export async function readGgufHeader(file: string): Promise<GgufContents> {
  const fh = await open(file, "r");
  try {
    const size = (await fh.stat()).size;
    let buf = new Uint8Array(0);
    let view = new DataView(buf.buffer);
    let pos = 0;
    const fail = (what: string, at = pos): never => {
      throw new CheckpointError(`not a GGUF file kiln can read: ${what}`, { where: `${file} (byte ${at})`, hint: "the file is corrupt or truncated; export it again" });
    };
    const need = async (n: number) => {
      if (pos + n > size) fail(`the file ends at byte ${size}, inside a value that needs ${n} bytes`);
      if (pos + n <= buf.length) return;
      const want = Math.min(size, Math.max(pos + n, buf.length * 2, 1 << 20));
      const next = new Uint8Array(want);
      next.set(buf);
      await fh.read(next, buf.length, want - buf.length, buf.length);
      buf = next;
      view = new DataView(buf.buffer);
    };
    const scalar = async (type: Exclude<GgufScalarType, "string">): Promise<number | bigint | boolean> => {
      await need(SCALAR_BYTES[type]);
      const at = pos;
      pos += SCALAR_BYTES[type];
      switch (type) {
        case "u8": return view.getUint8(at);
        case "i8": return view.getInt8(at);
        case "u16": return view.getUint16(at, true);
        case "i16": return view.getInt16(at, true);
        case "u32": return view.getUint32(at, true);
        case "i32": return view.getInt32(at, true);
        case "f32": return view.getFloat32(at, true);
        case "bool": return view.getUint8(at) !== 0;
        case "u64": return view.getBigUint64(at, true);
        case "i64": return view.getBigInt64(at, true);
        case "f64": return view.getFloat64(at, true);
      }
    };
    const count = async (what: string, most: number): Promise<number> => {
      const at = pos;
      const n = (await scalar("u64")) as bigint;
      if (n > BigInt(most)) fail(`${what} ${n} is more than the file can hold`, at);
      return Number(n);
    };
    const string = async (): Promise<string> => {
      const n = await count("a string length of", Math.min(size, MOST_ITEMS));
      await need(n);
      const s = new TextDecoder("utf-8", { fatal: false }).decode(buf.subarray(pos, pos + n));
      pos += n;
      return s;
    };
    const valueType = async (): Promise<GgufScalarType | "array"> => {
      const at = pos;
      const c = (await scalar("u32")) as number;
      return GGUF_VALUE_TYPES[c] ?? fail(`value type ${c} is not one GGUF defines`, at);
    };
    const item = async (type: GgufScalarType) => (type === "string" ? string() : scalar(type));

    if ((await scalar("u32")) !== GGUF_MAGIC) fail("it does not start with GGUF", 0);
    const version = (await scalar("u32")) as number;
    if (version !== 2 && version !== 3) fail(`version ${version}; kiln reads GGUF 2 and 3`, 4);
    const tensorCount = await count("a tensor count of", size);
    const kvCount = await count("a metadata count of", size);
    const metadata = new Map<string, GgufValue>();
    for (let i = 0; i < kvCount; i++) {
      const key = await string();
      const type = await valueType();
      if (type === "array") {
        const itemAt = pos;
        const itemType = await valueType();
        if (itemType === "array") fail(`${key} is an array of arrays, which kiln does not read`, itemAt);
        const n = await count(`${key}'s length of`, Math.min(size, MOST_ITEMS));
        const values: (number | bigint | boolean | string)[] = [];
        for (let j = 0; j < n; j++) values.push(await item(itemType as GgufScalarType));
        metadata.set(key, { type: "array", itemType: itemType as GgufScalarType, values });
      } else metadata.set(key, { type, value: await item(type) } as GgufValue);
    }
    const infos: { name: string; ne: number[]; type: GgufTensorInfo["type"]; relative: number; at: number }[] = [];
    for (let i = 0; i < tensorCount; i++) {
      const at = pos;
      const name = await string();
      const dims = (await scalar("u32")) as number;
      if (dims < 1 || dims > 4) fail(`tensor ${name} has ${dims} dimensions; GGUF allows 1 to 4`, at);
      const ne: number[] = [];
      for (let d = 0; d < dims; d++) ne.push(await count(`tensor ${name}'s dimension of`, Number.MAX_SAFE_INTEGER));
      const typeAt = pos;
      const c = (await scalar("u32")) as number;
      const type = ggmlTypeOfCode(c) ?? fail(`tensor ${name} has ggml type ${c}; kiln reads ${Object.keys(GGML_TYPES).join(", ")}`, typeAt);
      const relative = await count(`tensor ${name}'s offset of`, size);
      infos.push({ name, ne, type, relative, at });
    }
    const align = metadata.get("general.alignment");
    const alignment = align?.type === "u32" ? align.value : GGUF_DEFAULT_ALIGNMENT;
    const dataOffset = alignUp(pos, alignment);
    const tensors = infos.map((t): GgufTensorInfo => {
      const elements = t.ne.reduce((a, b) => a * b, 1);
      if (t.ne[0] % GGML_TYPES[t.type].block !== 0) fail(`tensor ${t.name}'s rows of ${t.ne[0]} are not whole ${t.type} blocks`, t.at);
      const bytes = ggmlBytes(t.type, elements);
      const offset = dataOffset + t.relative;
      if (offset + bytes > size) fail(`tensor ${t.name} (${bytes} bytes from byte ${offset}) runs past the end of the file (${size} bytes)`, t.at);
      return { name: t.name, ne: t.ne, type: t.type, offset, bytes };
    });
    return { version, metadata, tensors, dataOffset };
  } finally {
    await fh.close();
  }
}
