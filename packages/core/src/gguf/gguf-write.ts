import { KilnError } from "@kiln/contract";
import { AtomicOutputFile } from "../fs/write-atomically.js";
import { GGML_TYPES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE_TYPES, GGUF_VERSION, type GgufScalarType, type GgufTensor, type GgufValue, SCALAR_BYTES, alignUp, ggmlBytes } from "./gguf-format.js";

/** A tensor to write, its bytes already in the tensor's ggml type. */
export interface GgufTensorData extends GgufTensor {
  data: Uint8Array;
}

/** Grows as it is written: the header, metadata and tensor infos. */
class ByteWriter {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  scalar(type: Exclude<GgufScalarType, "string">, v: number | bigint | boolean): void {
    this.room(SCALAR_BYTES[type]);
    const at = this.length, dv = this.view;
    switch (type) {
      case "u8": dv.setUint8(at, v as number); break;
      case "i8": dv.setInt8(at, v as number); break;
      case "u16": dv.setUint16(at, v as number, true); break;
      case "i16": dv.setInt16(at, v as number, true); break;
      case "u32": dv.setUint32(at, v as number, true); break;
      case "i32": dv.setInt32(at, v as number, true); break;
      case "f32": dv.setFloat32(at, v as number, true); break;
      case "bool": dv.setUint8(at, v ? 1 : 0); break;
      case "u64": dv.setBigUint64(at, BigInt(v as number | bigint), true); break;
      case "i64": dv.setBigInt64(at, BigInt(v as number | bigint), true); break;
      case "f64": dv.setFloat64(at, v as number, true); break;
    }
    this.length += SCALAR_BYTES[type];
  }

  string(s: string): void {
    const bytes = new TextEncoder().encode(s);
    this.scalar("u64", BigInt(bytes.length));
    this.room(bytes.length);
    this.buf.set(bytes, this.length);
    this.length += bytes.length;
  }

  item(type: GgufScalarType, v: number | bigint | boolean | string): void {
    if (type === "string") this.string(v as string);
    else this.scalar(type, v as number | bigint | boolean);
  }

  zeros(n: number): void {
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

const code = (t: GgufScalarType | "array") => GGUF_VALUE_TYPES.indexOf(t);

/**
 * Writes a GGUF v3 file atomically: the metadata in the order given (with
 * general.alignment when it is not the default), the tensor infos, then each tensor's
 * data at an aligned offset, the last one padded too. A tensor whose data is not its ne x type in bytes is refused.
 */
export async function writeGguf(target: string, metadata: ReadonlyMap<string, GgufValue>, tensors: readonly GgufTensorData[], alignment = GGUF_DEFAULT_ALIGNMENT): Promise<void> {
  const w = new ByteWriter();
  const kv = new Map(metadata);
  if (alignment !== GGUF_DEFAULT_ALIGNMENT) kv.set("general.alignment", { type: "u32", value: alignment });
  w.scalar("u32", GGUF_MAGIC);
  w.scalar("u32", GGUF_VERSION);
  w.scalar("u64", BigInt(tensors.length));
  w.scalar("u64", BigInt(kv.size));
  for (const [key, v] of kv) {
    w.string(key);
    w.scalar("u32", code(v.type));
    if (v.type === "array") {
      w.scalar("u32", code(v.itemType));
      w.scalar("u64", BigInt(v.values.length));
      for (const x of v.values) w.item(v.itemType, x);
    } else w.item(v.type, v.value);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    const elements = t.ne.reduce((a, b) => a * b, 1);
    if (t.ne[0] % GGML_TYPES[t.type].block !== 0 || t.data.length !== ggmlBytes(t.type, elements)) {
      throw new KilnError(`GGUF tensor ${t.name}: ${t.data.length} bytes are not ${t.ne.join(" x ")} values of ${t.type}`, { where: target, hint: "this is a bug in the exporter; please report it" });
    }
    w.string(t.name);
    w.scalar("u32", t.ne.length);
    for (const n of t.ne) w.scalar("u64", BigInt(n));
    w.scalar("u32", GGML_TYPES[t.type].code);
    w.scalar("u64", BigInt(offset));
    offsets.push(offset);
    offset = alignUp(offset + t.data.length, alignment);
  }
  w.zeros(alignUp(w.length, alignment) - w.length);
  const out = await AtomicOutputFile.create(target, { what: "GGUF file" });
  try {
    await out.append(w.bytes());
    let at = 0;
    for (let i = 0; i < tensors.length; i++) {
      if (offsets[i] > at) await out.append(new Uint8Array(offsets[i] - at));
      await out.append(tensors[i].data);
      at = offsets[i] + tensors[i].data.length;
    }
    // The last tensor is padded to the alignment too, as llama.cpp's writers do.
    if (alignUp(at, alignment) > at) await out.append(new Uint8Array(alignUp(at, alignment) - at));
  } catch (err) {
    await out.abort();
    throw err;
  }
  await out.commit();
}
