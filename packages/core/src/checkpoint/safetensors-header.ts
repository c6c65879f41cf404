import { CheckpointError } from "@kiln/contract";
import { findDuplicateJsonKey } from "./json-duplicate-keys.js";
import {
  SAFETENSORS_DTYPES,
  isSafetensorsDType,
  safetensorsDTypeSize,
  type SafetensorsDType,
} from "./safetensors-dtype.js";

// File layout:
//   [0, 8)          u64 little-endian N, the header's length in bytes
//   [8, 8 + N)      UTF-8 JSON object, may be padded at the end with spaces
//   [8 + N, size)   data buffer; each tensor's data_offsets are relative to its start
// The header maps tensor name -> {dtype, shape, data_offsets}, plus an optional
// "__metadata__" object of string values. Tensors tile the data buffer exactly.

/** Bytes of the length field that opens every file. */
export const SAFETENSORS_LENGTH_BYTES = 8;
/** Largest header accepted (the limit the reference implementation uses). */
export const SAFETENSORS_MAX_HEADER_BYTES = 100_000_000;
export const SAFETENSORS_METADATA_KEY = "__metadata__";

export interface SafetensorsTensorInfo {
  name: string;
  dtype: SafetensorsDType;
  /** Dimensions, outermost first; [] is a scalar (one element). */
  shape: number[];
  /** Byte range [begin, end) within the data buffer. */
  dataOffsets: [number, number];
  byteLength: number;
}

export interface SafetensorsHeader {
  /** Length N of the JSON header, padding included. */
  headerLength: number;
  /** File offset of the data buffer: 8 + N. */
  dataStart: number;
  /** Bytes in the data buffer. */
  dataLength: number;
  /** Tensors by name, in the order their data lies in the file. */
  tensors: Map<string, SafetensorsTensorInfo>;
  metadata: Record<string, string>;
}

export interface SafetensorsSource {
  /** Shown in errors: a path, or a label for bytes held in memory. */
  fileName: string;
  /** Size of the whole file; defaults to the length of the bytes given. */
  fileSize?: number;
}

const NOT_SAFETENSORS =
  "Check that the path names a .safetensors file and that it was copied completely; if it is damaged, load an earlier checkpoint or export it again.";

/**
 * Reads the length field from the first 8 bytes of a file of `fileSize` bytes
 * and checks that a header of that length fits the limit and the file.
 */
export function readSafetensorsHeaderLength(prefix: Uint8Array, source: Required<SafetensorsSource>): number {
  const { fileName, fileSize } = source;
  if (fileSize < SAFETENSORS_LENGTH_BYTES || prefix.byteLength < SAFETENSORS_LENGTH_BYTES) {
    throw new CheckpointError(
      `file is ${fileSize} bytes, too short for the 8-byte header length that opens a safetensors file`,
      { where: fileName, hint: NOT_SAFETENSORS },
    );
  }
  const view = new DataView(prefix.buffer, prefix.byteOffset, SAFETENSORS_LENGTH_BYTES);
  const declared = view.getBigUint64(0, true);
  if (declared > BigInt(SAFETENSORS_MAX_HEADER_BYTES)) {
    throw new CheckpointError(
      `header length field says ${declared} bytes, over the ${SAFETENSORS_MAX_HEADER_BYTES}-byte limit for a safetensors header`,
      { where: fileName, hint: NOT_SAFETENSORS },
    );
  }
  const headerLength = Number(declared);
  if (headerLength < 2) {
    throw new CheckpointError(`header length field says ${headerLength} bytes, too short for a JSON object`, {
      where: fileName,
      hint: NOT_SAFETENSORS,
    });
  }
  if (SAFETENSORS_LENGTH_BYTES + headerLength > fileSize) {
    throw new CheckpointError(
      `header length field says ${headerLength} bytes, but only ${fileSize - SAFETENSORS_LENGTH_BYTES} bytes follow it (the file is truncated or not safetensors)`,
      { where: fileName, hint: NOT_SAFETENSORS },
    );
  }
  return headerLength;
}

/**
 * Parses and checks the header of a safetensors file. `bytes` starts at the
 * beginning of the file and holds at least the length field and the header;
 * the data buffer need not be present, but `fileSize` must then be given.
 * Every defect throws a CheckpointError naming the file, the tensor and the fault.
 */
export function parseSafetensorsHeader(bytes: Uint8Array, source: SafetensorsSource): SafetensorsHeader {
  const fileName = source.fileName;
  const fileSize = source.fileSize ?? bytes.byteLength;
  const headerLength = readSafetensorsHeaderLength(bytes, { fileName, fileSize });
  const dataStart = SAFETENSORS_LENGTH_BYTES + headerLength;
  if (bytes.byteLength < dataStart) {
    throw new CheckpointError(`only ${bytes.byteLength} bytes were read, but the header ends at byte ${dataStart}`, {
      where: fileName,
      hint: NOT_SAFETENSORS,
    });
  }
  const root = parseHeaderJson(bytes.subarray(SAFETENSORS_LENGTH_BYTES, dataStart), fileName);

  let metadata: Record<string, string> = {};
  const infos: SafetensorsTensorInfo[] = [];
  for (const [name, entry] of Object.entries(root)) {
    if (name === SAFETENSORS_METADATA_KEY) metadata = checkMetadata(entry, fileName);
    else infos.push(checkTensorEntry(name, entry, fileName));
  }

  const dataLength = fileSize - dataStart;
  infos.sort((a, b) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1]);
  checkCoverage(infos, dataLength, fileName);
  return {
    headerLength,
    dataStart,
    dataLength,
    tensors: new Map(infos.map((info) => [info.name, info])),
    metadata,
  };
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Deeper than any safetensors header nests, far below what would make JSON.parse build millions of nested values. */
const MAX_HEADER_DEPTH = 16;

/** Whether JSON text nests objects and arrays deeper than `limit` (string contents skipped): a linear scan, before JSON.parse builds anything. */
function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > limit) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return false;
}

function parseHeaderJson(header: Uint8Array, fileName: string): Record<string, unknown> {
  if (header[0] !== 0x7b /* { */) {
    throw new CheckpointError(
      `header does not start with "{" (first byte is 0x${header[0].toString(16).padStart(2, "0")}), so it is not a safetensors header`,
      { where: fileName, hint: NOT_SAFETENSORS },
    );
  }
  let text: string;
  try {
    text = utf8.decode(header);
  } catch {
    throw new CheckpointError("header is not valid UTF-8", { where: fileName, hint: NOT_SAFETENSORS });
  }
  if (nestsDeeperThan(text, MAX_HEADER_DEPTH)) {
    throw new CheckpointError(
      `header JSON nests objects or arrays deeper than ${MAX_HEADER_DEPTH} levels (a safetensors header nests 3: the entries, their fields, a shape)`,
      { where: fileName, hint: NOT_SAFETENSORS },
    );
  }
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(`header is not valid JSON (${(err as Error).message})`, {
      where: fileName,
      hint: NOT_SAFETENSORS,
    });
  }
  if (!isPlainObject(root)) {
    throw new CheckpointError("header JSON is not an object of tensor entries", { where: fileName, hint: NOT_SAFETENSORS });
  }
  const duplicate = findDuplicateJsonKey(text);
  if (duplicate) {
    const inside = duplicate.path.length === 0 ? "the header" : `entry ${duplicate.path.map(quote).join(" > ")}`;
    throw new CheckpointError(`key ${quote(duplicate.key)} appears twice in ${inside}`, {
      where: fileName,
      hint: "The file is ambiguous (which entry is meant is not defined); export it again with a writer that keeps names unique.",
    });
  }
  return root;
}

function checkMetadata(entry: unknown, fileName: string): Record<string, string> {
  const where = `${fileName} (${SAFETENSORS_METADATA_KEY})`;
  if (entry === null) return {};
  if (!isPlainObject(entry)) {
    throw new CheckpointError(`${SAFETENSORS_METADATA_KEY} must be an object of strings, found ${describe(entry)}`, {
      where,
      hint: NOT_SAFETENSORS,
    });
  }
  for (const [key, value] of Object.entries(entry)) {
    if (typeof value !== "string") {
      throw new CheckpointError(`metadata value for key ${quote(key)} is ${describe(value)}, but safetensors metadata holds only strings`, {
        where,
        hint: "Store structured metadata as a JSON string, and export the file again.",
      });
    }
  }
  return Object.fromEntries(Object.entries(entry as Record<string, string>));
}

const ENTRY_KEYS = new Set(["dtype", "shape", "data_offsets"]);

function checkTensorEntry(name: string, entry: unknown, fileName: string): SafetensorsTensorInfo {
  const where = `${fileName} (tensor ${quote(name)})`;
  const fail = (what: string, hint = NOT_SAFETENSORS): never => {
    throw new CheckpointError(what, { where, hint });
  };
  if (name.length === 0) fail("a tensor has an empty name", "Export the file again with a name for every tensor.");
  if (!isPlainObject(entry)) return fail(`entry is ${describe(entry)}, not an object with dtype, shape and data_offsets`);
  for (const key of Object.keys(entry)) {
    if (!ENTRY_KEYS.has(key)) fail(`entry has an unknown key ${quote(key)} (expected only dtype, shape, data_offsets)`);
  }

  const dtype = entry.dtype;
  if (dtype === undefined) fail("entry has no dtype");
  if (!isSafetensorsDType(dtype)) {
    fail(
      `dtype ${typeof dtype === "string" ? quote(dtype) : describe(dtype)} is not one kiln reads (known: ${SAFETENSORS_DTYPES.join(", ")})`,
      "Convert the tensor to a supported dtype before loading (F32, BF16 and F16 for weights), or check that the file is not damaged.",
    );
  }
  const st = dtype as SafetensorsDType;

  const shape = entry.shape;
  if (!Array.isArray(shape)) return fail(`shape is ${describe(shape)}, not an array of dimensions`);
  let elements = 1n;
  for (let i = 0; i < shape.length; i++) {
    const dim: unknown = shape[i];
    if (typeof dim !== "number" || !Number.isSafeInteger(dim) || dim < 0) {
      fail(`shape[${i}] is ${describe(dim)}, not a non-negative integer`);
    }
    elements *= BigInt(dim as number);
  }

  const offsets = entry.data_offsets;
  if (!Array.isArray(offsets) || offsets.length !== 2) {
    return fail(`data_offsets is ${describe(offsets)}, not a pair [begin, end]`);
  }
  const [begin, end] = offsets as unknown[];
  for (const [label, v] of [["begin", begin], ["end", end]] as const) {
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
      fail(`data_offsets ${label} is ${describe(v)}, not a non-negative integer`);
    }
  }
  const b = (begin as number) + 0; // + 0 turns -0 into 0
  const e = (end as number) + 0;
  if (e < b) fail(`data_offsets [${b}, ${e}] end before they begin`);

  const expected = elements * BigInt(safetensorsDTypeSize(st));
  if (BigInt(e - b) !== expected) {
    fail(
      `data_offsets [${b}, ${e}] span ${e - b} bytes, but shape [${shape.join(", ")}] of ${st} needs ${expected} bytes`,
    );
  }
  return { name, dtype: st, shape: (shape as number[]).map((d) => d + 0), dataOffsets: [b, e], byteLength: e - b };
}

/** Sorted tensors must cover [0, dataLength) exactly: no overlap, no hole, nothing after the last. */
function checkCoverage(sorted: SafetensorsTensorInfo[], dataLength: number, fileName: string): void {
  let cursor = 0;
  let previous: SafetensorsTensorInfo | undefined;
  for (const info of sorted) {
    const [begin, end] = info.dataOffsets;
    const where = `${fileName} (tensor ${quote(info.name)})`;
    if (begin < cursor) {
      throw new CheckpointError(
        `data_offsets [${begin}, ${end}] overlap tensor ${quote(previous?.name ?? "")}, which ends at ${cursor}`,
        { where, hint: NOT_SAFETENSORS },
      );
    }
    if (begin > cursor) {
      throw new CheckpointError(
        `data_offsets begin at ${begin}, leaving ${begin - cursor} unclaimed bytes at ${cursor} in the data buffer`,
        { where, hint: NOT_SAFETENSORS },
      );
    }
    if (end > dataLength) {
      throw new CheckpointError(
        `data_offsets [${begin}, ${end}] run past the end of the data buffer (${dataLength} bytes): the file is truncated`,
        { where, hint: NOT_SAFETENSORS },
      );
    }
    cursor = end;
    if (end > begin) previous = info;
  }
  if (cursor < dataLength) {
    throw new CheckpointError(
      `${dataLength - cursor} bytes follow the last tensor's data (data buffer is ${dataLength} bytes, tensors cover ${cursor})`,
      { where: fileName, hint: NOT_SAFETENSORS },
    );
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A short, quoted form of a possibly long name for messages. */
function quote(name: string): string {
  const shown = name.length > 120 ? `${name.slice(0, 120)}…` : name;
  return JSON.stringify(shown);
}

function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return `the string ${quote(value)}`;
  return `${typeof value} ${String(value)}`;
}
