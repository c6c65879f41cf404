import { type DType, bytesPerElement } from "./dtype.js";
import { bf16ToF32, f16ToF32, f64ToBf16, f64ToF16 } from "./half.js";

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * `bytes` as a typed array of `count` elements when it can be read in place: a little-endian
 * host (the stored order) and an offset aligned to the element size; else undefined.
 */
function aligned<A>(View: { new (b: ArrayBufferLike, off: number, n: number): A; BYTES_PER_ELEMENT: number }, bytes: Uint8Array, count: number): A | undefined {
  return LITTLE_ENDIAN && bytes.byteOffset % View.BYTES_PER_ELEMENT === 0 ? new View(bytes.buffer, bytes.byteOffset, count) : undefined;
}

/** Reads `count` little-endian elements of `dtype` from `bytes` as exact f64 values. */
export function decodeElements(bytes: Uint8Array, dtype: DType, count: number): Float64Array {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, count * bytesPerElement(dtype));
  const out = new Float64Array(count);
  switch (dtype) {
    case "f32": {
      const f = aligned(Float32Array, bytes, count);
      if (f) out.set(f);
      else for (let i = 0; i < count; i++) out[i] = dv.getFloat32(i * 4, true);
      break;
    }
    case "bf16":
    case "f16": {
      const decode = dtype === "bf16" ? bf16ToF32 : f16ToF32;
      const u = aligned(Uint16Array, bytes, count);
      if (u) for (let i = 0; i < count; i++) out[i] = decode(u[i]);
      else for (let i = 0; i < count; i++) out[i] = decode(dv.getUint16(i * 2, true));
      break;
    }
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
    case "f32": {
      const f = aligned(Float32Array, bytes, n);
      if (f) f.set(values); // the same round to nearest even as setFloat32
      else for (let i = 0; i < n; i++) dv.setFloat32(i * 4, values[i], true);
      break;
    }
    case "bf16":
    case "f16": {
      const encode = dtype === "bf16" ? f64ToBf16 : f64ToF16;
      const u = aligned(Uint16Array, bytes, n);
      if (u) for (let i = 0; i < n; i++) u[i] = encode(values[i]);
      else for (let i = 0; i < n; i++) dv.setUint16(i * 2, encode(values[i]), true);
      break;
    }
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
