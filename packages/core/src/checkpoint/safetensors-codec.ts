import type { SafetensorsDType } from "./safetensors-dtype.js";
import { parseSafetensorsHeader, type SafetensorsHeader } from "./safetensors-header.js";
import { bytesOf, planSafetensorsLayout, type SafetensorsTensorInput, type StreamedTensorInput } from "./safetensors-layout.js";
import { isTensorByteSource } from "./tensor-byte-source.js";

/** A tensor read from a file: its bytes as stored (little-endian), unconverted. */
export interface SafetensorsTensor {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  data: Uint8Array;
}

export interface DecodedSafetensors {
  /** Tensors by name, in the order their data lies in the file. */
  tensors: Map<string, SafetensorsTensor>;
  metadata: Record<string, string>;
}

const IN_MEMORY = "<in-memory safetensors>";

/** The bytes of a safetensors file holding `tensors` (see planSafetensorsLayout for the order). */
export function encodeSafetensors(
  tensors: readonly SafetensorsTensorInput[],
  metadata: Readonly<Record<string, string>> = {},
  fileName = IN_MEMORY,
): Uint8Array {
  const layout = planSafetensorsLayout(tensors, metadata, fileName);
  const out = new Uint8Array(layout.fileSize);
  out.set(layout.head, 0);
  for (const t of layout.tensors) out.set(bytesOf(t.input.data), layout.head.byteLength + t.begin);
  return out;
}

/** As encodeSafetensors, for tensors whose bytes may come from a TensorByteSource (each read straight into the result). */
export async function encodeStreamedSafetensors(
  tensors: readonly StreamedTensorInput[],
  metadata: Readonly<Record<string, string>> = {},
  fileName = IN_MEMORY,
): Promise<Uint8Array> {
  const layout = planSafetensorsLayout(tensors, metadata, fileName);
  const out = new Uint8Array(layout.fileSize);
  out.set(layout.head, 0);
  for (const t of layout.tensors) {
    const at = layout.head.byteLength + t.begin;
    if (isTensorByteSource(t.input.data)) await t.input.data.read(out.subarray(at, layout.head.byteLength + t.end), 0);
    else out.set(bytesOf(t.input.data), at);
  }
  return out;
}

/** Parses a whole file held in memory. Tensor data are views into `bytes`, not copies. */
export function decodeSafetensors(bytes: Uint8Array, fileName = IN_MEMORY): DecodedSafetensors {
  const header = parseSafetensorsHeader(bytes, { fileName, fileSize: bytes.byteLength });
  return { tensors: tensorViews(header, bytes), metadata: header.metadata };
}

function tensorViews(header: SafetensorsHeader, bytes: Uint8Array): Map<string, SafetensorsTensor> {
  const tensors = new Map<string, SafetensorsTensor>();
  for (const info of header.tensors.values()) {
    const [begin, end] = info.dataOffsets;
    tensors.set(info.name, {
      name: info.name,
      dtype: info.dtype,
      shape: info.shape,
      data: bytes.subarray(header.dataStart + begin, header.dataStart + end),
    });
  }
  return tensors;
}
