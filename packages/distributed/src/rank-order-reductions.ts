import { type FloatDType, bytesPerElement, f32BitsToBf16Bits } from "@kiln/contract";
import type { ReduceOp } from "@kiln/core";

/** Combines every rank's part of a collective (parts[r] from rank r) into the result every rank receives. */
export type Combine = (parts: readonly Uint8Array[]) => Uint8Array;

/** Combines every rank's part into one result per rank (results[r] goes to rank r). */
export type CombineEach = (parts: readonly Uint8Array[]) => readonly Uint8Array[];

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

/**
 * Reduce-scatter: each part is worldSize chunks of `n` elements; rank r's result is
 * the rank-order sum (or mean) of the ranks' chunk r, the same bits as those
 * elements of sumInRankOrder over the whole parts.
 */
export function chunkSumsInRankOrder(dtype: FloatDType, op: ReduceOp, worldSize: number, n: number): CombineEach {
  const sum = sumInRankOrder(dtype, op, worldSize);
  const chunkBytes = n * bytesPerElement(dtype);
  return (parts) => Array.from({ length: worldSize }, (_, r) => sum(parts.map((p) => p.subarray(r * chunkBytes, (r + 1) * chunkBytes))));
}

/** All-gather: part r is rank r's chunk; every rank receives them end to end, by rank. */
export function concatenateByRank(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((bytes, p) => bytes + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
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
