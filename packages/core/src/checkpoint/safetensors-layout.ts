import { CheckpointError } from "@kiln/contract";
import { isSafetensorsDType, safetensorsDTypeSize, SAFETENSORS_DTYPES, type SafetensorsDType } from "./safetensors-dtype.js";
import { SAFETENSORS_LENGTH_BYTES, SAFETENSORS_METADATA_KEY } from "./safetensors-header.js";
import { isTensorByteSource, type TensorByteSource } from "./tensor-byte-source.js";

/** One tensor to write: its raw little-endian bytes, shape and dtype. */
export interface SafetensorsTensorInput {
  name: string;
  dtype: SafetensorsDType;
  shape: readonly number[];
  /** Any typed array or DataView; its bytes are written as they are in memory. */
  data: ArrayBufferView;
}

/** A tensor to write whose bytes may also come a piece at a time (writeSafetensors streams them). */
export interface StreamedTensorInput extends Omit<SafetensorsTensorInput, "data"> {
  data: ArrayBufferView | TensorByteSource;
}

export interface PlannedTensor<T extends StreamedTensorInput = SafetensorsTensorInput> {
  input: T;
  /** Byte range [begin, end) within the data buffer. */
  begin: number;
  end: number;
}

export interface SafetensorsLayout<T extends StreamedTensorInput = SafetensorsTensorInput> {
  /** Length field + header JSON + padding: everything before the data buffer. */
  head: Uint8Array;
  /** Tensors in the order their data is written. */
  tensors: PlannedTensor<T>[];
  dataLength: number;
  fileSize: number;
}

const encoder = new TextEncoder();

/**
 * Checks the tensors and lays out a file for them.
 *
 * Order: tensors are sorted by element size, largest first, then by name
 * (UTF-8 byte order), whatever order they came in. Since the header is padded
 * with spaces to a multiple of 8 bytes, every tensor then starts at a file
 * offset that is a multiple of its element size, so a reader can view the data
 * as a Float32Array (etc.) without copying. Equal inputs give equal bytes.
 * The header JSON lists "__metadata__" first (keys sorted), then the tensors in
 * data order, each as {"dtype","shape","data_offsets"} in that order.
 * The data starts at a multiple of 8 and each tensor's length is a multiple of
 * its element size, so a piece of a tensor written from a buffer whose length
 * is a multiple of 8 also starts at a multiple of the element size.
 */
export function planSafetensorsLayout<T extends StreamedTensorInput>(
  tensors: readonly T[],
  metadata: Readonly<Record<string, string>>,
  fileName: string,
): SafetensorsLayout<T> {
  const seen = new Set<string>();
  for (const t of tensors) {
    checkInput(t, fileName);
    if (seen.has(t.name)) {
      throw new CheckpointError(`tensor name ${JSON.stringify(t.name)} is given twice`, {
        where: fileName,
        hint: "Give every tensor a unique name.",
      });
    }
    seen.add(t.name);
  }
  const metadataKeys = Object.keys(metadata).sort(compareUtf8);
  for (const key of metadataKeys) {
    if (typeof metadata[key] !== "string") {
      throw new CheckpointError(`metadata value for key ${JSON.stringify(key)} is a ${typeof metadata[key]}, not a string`, {
        where: `${fileName} (${SAFETENSORS_METADATA_KEY})`,
        hint: "safetensors metadata holds only strings; store structured values as JSON strings.",
      });
    }
  }

  const ordered = [...tensors].sort(
    (a, b) => safetensorsDTypeSize(b.dtype) - safetensorsDTypeSize(a.dtype) || compareUtf8(a.name, b.name),
  );
  const planned: PlannedTensor<T>[] = [];
  let offset = 0;
  for (const input of ordered) {
    planned.push({ input, begin: offset, end: offset + input.data.byteLength });
    offset += input.data.byteLength;
  }

  const entries: string[] = [];
  if (metadataKeys.length > 0) {
    const fields = metadataKeys.map((k) => `${JSON.stringify(k)}:${JSON.stringify(metadata[k])}`);
    entries.push(`${JSON.stringify(SAFETENSORS_METADATA_KEY)}:{${fields.join(",")}}`);
  }
  for (const { input, begin, end } of planned) {
    const shape = input.shape.map((d) => d + 0).join(",");
    entries.push(
      `${JSON.stringify(input.name)}:{"dtype":"${input.dtype}","shape":[${shape}],"data_offsets":[${begin},${end}]}`,
    );
  }
  const json = encoder.encode(`{${entries.join(",")}}`);
  const headerLength = Math.ceil(json.byteLength / 8) * 8;
  const head = new Uint8Array(SAFETENSORS_LENGTH_BYTES + headerLength).fill(0x20 /* space */);
  new DataView(head.buffer).setBigUint64(0, BigInt(headerLength), true);
  head.set(json, SAFETENSORS_LENGTH_BYTES);
  return { head, tensors: planned, dataLength: offset, fileSize: head.byteLength + offset };
}

function checkInput(t: StreamedTensorInput, fileName: string): void {
  const where = `${fileName} (tensor ${JSON.stringify(t.name)})`;
  const fail = (what: string, hint: string): never => {
    throw new CheckpointError(what, { where, hint });
  };
  if (typeof t.name !== "string" || t.name.length === 0) fail("tensor name is empty", "Give every tensor a non-empty name.");
  if (t.name === SAFETENSORS_METADATA_KEY) {
    fail(`"${SAFETENSORS_METADATA_KEY}" is reserved for metadata`, "Rename the tensor.");
  }
  if (!isSafetensorsDType(t.dtype)) {
    fail(`dtype ${JSON.stringify(t.dtype)} is not a safetensors dtype`, `Use one of ${SAFETENSORS_DTYPES.join(", ")}.`);
  }
  if (!Array.isArray(t.shape)) fail("shape is not an array", "Pass the shape as an array of dimensions ([] for a scalar).");
  let elements = 1n;
  for (const dim of t.shape) {
    if (!Number.isSafeInteger(dim) || dim < 0) {
      fail(`shape [${t.shape.join(", ")}] has a dimension that is not a non-negative integer`, "Fix the shape.");
    }
    elements *= BigInt(dim);
  }
  if (!ArrayBuffer.isView(t.data) && !isTensorByteSource(t.data)) {
    fail("data is not a typed array, a DataView or a byte source", "Pass the tensor's bytes as a typed array.");
  }
  const needed = elements * BigInt(safetensorsDTypeSize(t.dtype));
  if (BigInt(t.data.byteLength) !== needed) {
    fail(
      `data has ${t.data.byteLength} bytes, but shape [${t.shape.join(", ")}] of ${t.dtype} needs ${needed}`,
      "Pass data whose byteLength equals the product of the shape times the dtype's size, or fix the shape or dtype.",
    );
  }
}

/**
 * Orders strings by their UTF-8 bytes (code point order), as the reference
 * implementation sorts names. UTF-16 code units agree with code points except
 * that surrogates (U+10000 and up) must sort after U+E000..U+FFFF.
 */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(i);
    if (ca !== cb) return codePointRank(ca) - codePointRank(cb);
  }
  return a.length - b.length;
}

function codePointRank(unit: number): number {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000;
  if (unit >= 0xe000) return unit - 0x800;
  return unit;
}

/** The tensor's bytes as a Uint8Array view (no copy). */
export function bytesOf(data: ArrayBufferView): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}
