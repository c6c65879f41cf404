// An independent reader of TensorBoard event files for the tests: record framing, the
// masked CRC32C and the protobuf wire format decoded by hand (it shares no code with kiln's writer).
import { readFile } from "node:fs/promises";

/** CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit through a byte table. */
const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32c(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function masked(crc: number): number {
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}

export interface DecodedEvent {
  wallTime: number;
  step: number;
  fileVersion?: string;
  /** summary.value[] as (tag, simple_value) pairs. */
  values: { tag: string; simpleValue: number }[];
}

/** The record payloads of a TFRecord file; throws on a bad length, a bad CRC or trailing bytes. */
export function records(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (at + 12 > bytes.length) throw new Error(`cut-short header at byte ${at}`);
    const length = Number(view.getBigUint64(at, true));
    if (view.getUint32(at + 8, true) !== masked(crc32c(bytes.subarray(at, at + 8)))) throw new Error(`bad length CRC at byte ${at}`);
    const end = at + 12 + length;
    if (end + 4 > bytes.length) throw new Error(`cut-short record at byte ${at}`);
    const data = bytes.subarray(at + 12, end);
    if (view.getUint32(end, true) !== masked(crc32c(data))) throw new Error(`bad data CRC at byte ${at}`);
    out.push(data);
    at = end + 4;
  }
  return out;
}

/** Protobuf wire format: (field number, wire type, value) for each field of a message. */
function* fields(bytes: Uint8Array): Generator<{ field: number; wire: number; varint: bigint; raw: Uint8Array }> {
  let at = 0;
  const varint = (): bigint => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const b = bytes[at++];
      if (b === undefined) throw new Error("varint runs past the end");
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
    }
  };
  while (at < bytes.length) {
    const key = Number(varint());
    const field = key >>> 3;
    const wire = key & 7;
    if (wire === 0) yield { field, wire, varint: varint(), raw: new Uint8Array() };
    else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      yield { field, wire, varint: 0n, raw: bytes.subarray(at, at + n) };
      at += n;
    } else if (wire === 2) {
      const n = Number(varint());
      yield { field, wire, varint: 0n, raw: bytes.subarray(at, at + n) };
      at += n;
    } else throw new Error(`unexpected wire type ${wire}`);
    if (at > bytes.length) throw new Error("field runs past the end");
  }
}

const text = (b: Uint8Array) => new TextDecoder("utf-8", { fatal: true }).decode(b);
const le = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);

/** tensorflow.Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5. */
export function decodeEvent(bytes: Uint8Array): DecodedEvent {
  const e: DecodedEvent = { wallTime: Number.NaN, step: 0, values: [] };
  for (const f of fields(bytes)) {
    if (f.field === 1 && f.wire === 1) e.wallTime = le(f.raw).getFloat64(0, true);
    else if (f.field === 2 && f.wire === 0) e.step = Number(BigInt.asIntN(64, f.varint));
    else if (f.field === 3 && f.wire === 2) e.fileVersion = text(f.raw);
    else if (f.field === 5 && f.wire === 2) {
      // Summary.value = 1 (repeated Value); Value.tag = 1 (string), Value.simple_value = 2 (float).
      for (const v of fields(f.raw)) {
        if (v.field !== 1 || v.wire !== 2) throw new Error(`unexpected Summary field ${v.field}`);
        let tag = "";
        let simpleValue = Number.NaN;
        for (const x of fields(v.raw)) {
          if (x.field === 1 && x.wire === 2) tag = text(x.raw);
          else if (x.field === 2 && x.wire === 5) simpleValue = le(x.raw).getFloat32(0, true);
          else throw new Error(`unexpected Summary.Value field ${x.field}`);
        }
        e.values.push({ tag, simpleValue });
      }
    } else throw new Error(`unexpected Event field ${f.field} (wire type ${f.wire})`);
  }
  return e;
}

export async function readEvents(file: string): Promise<DecodedEvent[]> {
  return records(await readFile(file)).map(decodeEvent);
}
