import { crc32c } from "@aws-crypto/crc32c";

// TFRecord framing, as TensorFlow's record_writer.cc writes it:
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)

/** TensorFlow's CRC mask: rotate right by 15 bits, then add a constant (mod 2^32). */
export function maskedCrc32c(bytes: Uint8Array): number {
  const crc = crc32c(bytes);
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}

/** One record: header, data and footer in one buffer. */
export function frameRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length + 4);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(data.length), true);
  view.setUint32(8, maskedCrc32c(out.subarray(0, 8)), true);
  out.set(data, 12);
  view.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}

export interface RecordScan {
  /** The data of every intact record, in file order. */
  records: Uint8Array[];
  /** Byte offset where reading stopped early: a record cut short or failing its CRC (undefined when the whole file read). */
  damagedAt?: number;
}

/** Reads records from the start of `bytes` until the end or the first cut-short or corrupt record. */
export function scanRecords(bytes: Uint8Array): RecordScan {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const records: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 12) return { records, damagedAt: at };
    const length = view.getBigUint64(at, true);
    if (view.getUint32(at + 8, true) !== maskedCrc32c(bytes.subarray(at, at + 8))) return { records, damagedAt: at };
    const end = at + 12 + Number(length) + 4;
    if (length > BigInt(bytes.length) || end > bytes.length) return { records, damagedAt: at };
    const data = bytes.subarray(at + 12, end - 4);
    if (view.getUint32(end - 4, true) !== maskedCrc32c(data)) return { records, damagedAt: at };
    records.push(data);
    at = end;
  }
  return { records };
}
