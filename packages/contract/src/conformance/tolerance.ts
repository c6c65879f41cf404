import type { DType } from "../dtype.js";

/**
 * Per-dtype tolerances: a value passes when
 *   |actual - expected| <= atol * max(1, max|expected|) + rtol * |expected|
 * The expected side is the oracle rounded once from f64; a backend computes in f32
 * (or rounds intermediates to the storage dtype), so allow a few output ulps plus
 * f32 accumulation error relative to the output's scale.
 */
export interface Tolerance {
  rtol: number;
  atol: number;
}

export const TOLERANCES: Record<DType, Tolerance> = {
  f32: { rtol: 2e-4, atol: 3e-5 },
  bf16: { rtol: 1.6e-2, atol: 8e-3 },
  f16: { rtol: 2e-3, atol: 2e-3 },
  i32: { rtol: 0, atol: 0 },
  u32: { rtol: 0, atol: 0 },
  u16: { rtol: 0, atol: 0 },
};

/** The looser of two tolerances. */
export function looser(a: Tolerance, b: Tolerance): Tolerance {
  return { rtol: Math.max(a.rtol, b.rtol), atol: Math.max(a.atol, b.atol) };
}

export interface Mismatch {
  index: number;
  actual: number;
  expected: number;
}

/** Elements of `actual` that miss `expected` under `tol`; NaN matches NaN, infinities match exactly. */
export function compareValues(actual: Float64Array, expected: Float64Array, tol: Tolerance, limit = 5): { mismatches: Mismatch[]; count: number } {
  let scale = 1;
  for (const e of expected) if (Number.isFinite(e)) scale = Math.max(scale, Math.abs(e));
  const mismatches: Mismatch[] = [];
  let count = 0;
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i], e = expected[i];
    let ok: boolean;
    if (Number.isNaN(e)) ok = Number.isNaN(a);
    else if (!Number.isFinite(e)) ok = a === e;
    else ok = Math.abs(a - e) <= tol.atol * scale + tol.rtol * Math.abs(e);
    if (!ok) {
      count++;
      if (mismatches.length < limit) mismatches.push({ index: i, actual: a, expected: e });
    }
  }
  return { mismatches, count };
}
