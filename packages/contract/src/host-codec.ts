import { type DType, bytesPerElement } from "./dtype.js";
import { bf16ToF32, f16ToF32, f64ToBf16, f64ToF16 } from "./half.js";

/** Reads `count` little-endian elements of `dtype` from `bytes` as exact f64 values. */
export function decodeElements(bytes: Uint8Array, dtype: DType, count: number): Float64Array {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, count * bytesPerElement(dtype));
  const out = new Float64Array(count);
  switch (dtype) {
    case "f32":
      for (let i = 0; i < count; i++) out[i] = dv.getFloat32(i * 4, true);
      break;
    case "bf16":
      for (let i = 0; i < count; i++) out[i] = bf16ToF32(dv.getUint16(i * 2, true));
      break;
    case "f16":
      for (let i = 0; i < count; i++) out[i] = f16ToF32(dv.getUint16(i * 2, true));
      break;
    case "i32":
      for (let i = 0; i < count; i++) out[i] = dv.getInt32(i * 4, true);
      break;
    case "u32":
      for (let i = 0; i < count; i++) out[i] = dv.getUint32(i * 4, true);
      break;
    case "u16":
      for (let i = 0; i < count; i++) out[i] = dv.getUint16(i * 2, true);
      break;
  }
  return out;
}

/** Writes `values` into `bytes` as `dtype`, each rounded once to nearest even (integers truncate). */
export function encodeElements(values: ArrayLike<number>, dtype: DType, bytes: Uint8Array): void {
  const n = values.length;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, n * bytesPerElement(dtype));
  switch (dtype) {
    case "f32":
      for (let i = 0; i < n; i++) dv.setFloat32(i * 4, values[i], true);
      break;
    case "bf16":
      for (let i = 0; i < n; i++) dv.setUint16(i * 2, f64ToBf16(values[i]), true);
      break;
    case "f16":
      for (let i = 0; i < n; i++) dv.setUint16(i * 2, f64ToF16(values[i]), true);
      break;
    case "i32":
      for (let i = 0; i < n; i++) dv.setInt32(i * 4, values[i], true);
      break;
    case "u32":
      for (let i = 0; i < n; i++) dv.setUint32(i * 4, values[i], true);
      break;
    case "u16":
      for (let i = 0; i < n; i++) dv.setUint16(i * 2, values[i], true);
      break;
  }
}

/** A fresh byte array holding `values` as `dtype`. */
export function encodeToBytes(values: ArrayLike<number>, dtype: DType): Uint8Array {
  const bytes = new Uint8Array(values.length * bytesPerElement(dtype));
  encodeElements(values, dtype, bytes);
  return bytes;
}
