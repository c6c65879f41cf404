import { type Backend, type BufferSlice, type FloatDType, bytesPerElement, encodeElements } from "@kiln/contract";
import type { TensorByteSource } from "./tensor-byte-source.js";

/** f32 values a rounding source downloads at a time (256 KiB of scratch). */
const ROUNDING_CHUNK_ELEMENTS = 64 * 1024;

/**
 * `elements` f32 values in a device buffer as a tensor's bytes, downloaded a
 * piece at a time as a writer asks for them. With a 16-bit `dtype` the values
 * are rounded to it on the way (nearest even, as encodeElements rounds) through
 * a scratch of at most 256 KiB; nothing larger than the piece asked for is held.
 */
export function deviceTensorSource(backend: Backend, at: BufferSlice, elements: number, dtype: FloatDType = "f32"): TensorByteSource {
  const size = bytesPerElement(dtype);
  if (dtype === "f32") {
    return {
      byteLength: elements * 4,
      read: (target, offset) => backend.download({ buffer: at.buffer, byteOffset: at.byteOffset + offset }, target),
    };
  }
  let scratch: Float32Array | undefined;
  return {
    byteLength: elements * size,
    async read(target, offset) {
      scratch ??= new Float32Array(Math.min(elements, ROUNDING_CHUNK_ELEMENTS));
      const first = offset / size;
      const count = target.byteLength / size;
      for (let done = 0; done < count; done += scratch.length) {
        const n = Math.min(scratch.length, count - done);
        const values = scratch.subarray(0, n);
        await backend.download({ buffer: at.buffer, byteOffset: at.byteOffset + 4 * (first + done) }, values);
        encodeElements(values, dtype, target.subarray(done * size, (done + n) * size));
      }
    },
  };
}
