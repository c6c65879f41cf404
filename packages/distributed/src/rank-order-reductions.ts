import { type FloatDType, f32BitsToBf16Bits } from "@kiln/contract";
import type { ReduceOp } from "@kiln/core";

/** Combines every rank's part of a collective (parts[r] from rank r) into the result every rank receives. */
export type Combine = (parts: readonly Uint8Array[]) => Uint8Array;

/**
 * Element-wise sum (or mean) of the ranks' f32 or bf16 values, added in rank
 * order ((x0 + x1) + x2 ...) in f32, so the result does not depend on which
 * rank's data arrived first. bf16 parts are widened exactly, summed in f32 and
 * rounded to bf16 once, to nearest even.
 */
export function sumInRankOrder(dtype: FloatDType, op: ReduceOp, worldSize: number): Combine {
  if (dtype !== "f32" && dtype !== "bf16") throw new RangeError(`all-reduce of ${dtype} is not supported: f32 and bf16 only`);
  return (parts) => {
    const acc = dtype === "f32" ? new Float32Array(parts[0].slice().buffer) : widenBf16(parts[0]);
    for (const part of parts.slice(1)) {
      const x = dtype === "f32" ? new Float32Array(part.buffer, part.byteOffset, part.byteLength / 4) : widenBf16(part);
      for (let i = 0; i < acc.length; i++) acc[i] += x[i];
    }
    if (op === "mean") for (let i = 0; i < acc.length; i++) acc[i] /= worldSize;
    return dtype === "f32" ? new Uint8Array(acc.buffer) : narrowToBf16(acc);
  };
}

/** Sum (or mean) of host f64 numbers over the ranks, in rank order. */
export function sumScalarsInRankOrder(op: ReduceOp, worldSize: number): Combine {
  return (parts) => {
    const acc = new Float64Array(parts[0].slice().buffer);
    for (const part of parts.slice(1)) {
      const x = new Float64Array(part.buffer, part.byteOffset, part.byteLength / 8);
      for (let i = 0; i < acc.length; i++) acc[i] += x[i];
    }
    if (op === "mean") for (let i = 0; i < acc.length; i++) acc[i] /= worldSize;
    return new Uint8Array(acc.buffer);
  };
}

/** The part rank `root` sent (broadcast). */
export function partOf(root: number): Combine {
  return (parts) => parts[root];
}

/** bf16 bits to f32 values (exact). */
export function widenBf16(bytes: Uint8Array): Float32Array {
  const h = new Uint16Array(bytes.slice().buffer);
  const bits = new Uint32Array(h.length);
  for (let i = 0; i < h.length; i++) bits[i] = h[i] << 16;
  return new Float32Array(bits.buffer);
}

/** f32 values to bf16 bits, rounded to nearest even. */
export function narrowToBf16(values: Float32Array): Uint8Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = f32BitsToBf16Bits(bits[i]);
  return new Uint8Array(out.buffer);
}
