import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "@kiln/contract";
import { GGML_TYPES, type GgmlType, ggmlBytes } from "./gguf-format.js";

/** round() as C's roundf: halves away from zero. */
const roundAway = (x: number) => Math.sign(x) * Math.floor(Math.abs(x) + 0.5);

/**
 * f32 values in a ggml type's bytes (little-endian). q8_0 as ggml's reference quantizer:
 * per block of 32, d = max|x| / 127 (stored as f16), q = round(x / d) in int8.
 */
export function encodeGgml(values: Float32Array, type: GgmlType): Uint8Array {
  const out = new Uint8Array(ggmlBytes(type, values.length));
  const view = new DataView(out.buffer);
  switch (type) {
    case "f32":
      for (let i = 0; i < values.length; i++) view.setFloat32(4 * i, values[i], true);
      break;
    case "f16":
      for (let i = 0; i < values.length; i++) view.setUint16(2 * i, f32ToF16(values[i]), true);
      break;
    case "bf16":
      for (let i = 0; i < values.length; i++) view.setUint16(2 * i, f32ToBf16(values[i]), true);
      break;
    case "q8_0": {
      const { block, bytes } = GGML_TYPES.q8_0;
      for (let b = 0; b * block < values.length; b++) {
        let amax = 0;
        for (let j = 0; j < block; j++) amax = Math.max(amax, Math.abs(values[b * block + j]));
        const d = Math.fround(amax / 127);
        const id = d ? Math.fround(1 / d) : 0;
        view.setUint16(b * bytes, f32ToF16(d), true);
        for (let j = 0; j < block; j++) view.setInt8(b * bytes + 2 + j, roundAway(Math.fround(values[b * block + j] * id)));
      }
      break;
    }
  }
  return out;
}

/** A ggml type's bytes back to f32 values (q8_0: d * q). */
export function decodeGgml(bytes: Uint8Array, type: GgmlType, elements: number): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(elements);
  switch (type) {
    case "f32":
      for (let i = 0; i < elements; i++) out[i] = view.getFloat32(4 * i, true);
      break;
    case "f16":
      for (let i = 0; i < elements; i++) out[i] = f16ToF32(view.getUint16(2 * i, true));
      break;
    case "bf16":
      for (let i = 0; i < elements; i++) out[i] = bf16ToF32(view.getUint16(2 * i, true));
      break;
    case "q8_0": {
      const { block, bytes: size } = GGML_TYPES.q8_0;
      for (let b = 0; b * block < elements; b++) {
        const d = f16ToF32(view.getUint16(b * size, true));
        for (let j = 0; j < block; j++) out[b * block + j] = d * view.getInt8(b * size + 2 + j);
      }
      break;
    }
  }
  return out;
}
