import { type Backend, type BufferSlice, type FloatDType, bytesPerElement, decodeElements, encodeElements } from "@kiln/contract";
import type { TensorByteSource } from "./tensor-byte-source.js";

/** f32 values a rounding source downloads at a time (256 KiB of scratch). */
const ROUNDING_CHUNK_ELEMENTS = 64 * 1024;

/**
 * `elements` values of `stored` dtype (f32 by default) in a device buffer as a tensor's
 * bytes of `dtype`, downloaded a piece at a time as a writer asks for them. When the two
 * differ the values are converted on the way (widened exactly, or rounded to nearest even
 * as encodeElements rounds) through a scratch of at most 256 KiB; nothing larger than the
 * piece asked for is held.
 */
export function deviceTensorSource(backend: Backend, at: BufferSlice, elements: number, dtype: FloatDType = "f32", stored: FloatDType = "f32"): TensorByteSource {
  const size = bytesPerElement(dtype);
  if (dtype === stored) {
    return {
      byteLength: elements * size,
      read: (target, offset) => backend.download({ buffer: at.buffer, byteOffset: at.byteOffset + offset }, target),
    };
  }
  const storedSize = bytesPerElement(stored);
  let scratch: Float32Array | undefined;
  let raw: Uint8Array | undefined;
  return {
    byteLength: elements * size,
    async read(target, offset) {
      scratch ??= new Float32Array(Math.min(elements, ROUNDING_CHUNK_ELEMENTS));
      const first = offset / size;
      const count = target.byteLength / size;
      for (let done = 0; done < count; done += scratch.length) {
        const n = Math.min(scratch.length, count - done);
        const values = scratch.subarray(0, n);
        const from = { buffer: at.buffer, byteOffset: at.byteOffset + storedSize * (first + done) };
        if (stored === "f32") {
          await backend.download(from, values);
        } else {
          raw ??= new Uint8Array(scratch.length * storedSize);
          await backend.download(from, raw.subarray(0, n * storedSize));
          values.set(decodeElements(raw.subarray(0, n * storedSize), stored, n));
        }
        if (dtype === "f32") new Uint8Array(target.buffer, target.byteOffset + done * 4, n * 4).set(new Uint8Array(values.buffer, values.byteOffset, n * 4));
        else encodeElements(values, dtype, target.subarray(done * size, (done + n) * size));
      }
    },
  };
}
