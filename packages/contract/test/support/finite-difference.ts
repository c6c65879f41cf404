import { describe, expect } from "vitest";
import { seededRandom } from "../../src/conformance/rng.js";
import { BACKWARD_OF } from "../../src/kernels/index.js";
import type { OracleKernel } from "../../src/oracle/types.js";

export const H = 1e-6;

/** |analytic - numeric| <= ABS + REL * |numeric| */
export const ABS_TOL = 1e-6;
export const REL_TOL = 1e-5;

export function uniform(rand: () => number, n: number, lo = -1, hi = 1): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * rand();
  return out;
}

export function rng(seed: number): () => number {
  return seededRandom(seed);
}

/** sum_i x[i] * r[i] over the listed indices (all when omitted). */
export function dotAt(x: Float64Array, r: Float64Array, indices?: readonly number[]): number {
  let s = 0;
  if (indices) for (const i of indices) s += x[i] * r[i];
  else for (let i = 0; i < x.length; i++) s += x[i] * r[i];
  return s;
}

/** Indices of the logical elements of `rows` rows of `width`, `stride` apart. */
export function stridedIndices(rows: number, width: number, stride: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < rows; r++) for (let j = 0; j < width; j++) out.push(r * stride + j);
  return out;
}

/**
 * `rows` rows of `width` values uniform in [lo, hi), `stride` apart, NaN in the gaps between
 * them (a kernel that reads a gap shows it), and the indices of the values.
 */
export function gappedRows(rand: () => number, rows: number, width: number, stride: number, lo = -1, hi = 1): { v: Float64Array; logical: number[] } {
  const logical = stridedIndices(rows, width, stride);
  const isLogical = new Set(logical);
  const v = uniform(rand, (rows - 1) * stride + width).map((u, i) => (isLogical.has(i) ? lo + ((u + 1) / 2) * (hi - lo) : NaN));
  return { v, logical };
}

/**
 * Central differences of `loss` with respect to `input[i]` for every listed i, compared with
 * `analytic[i]`. Returns a list of mismatches (empty when all agree); `input` is restored.
 */
export function gradientMismatches(
  input: Float64Array,
  analytic: ArrayLike<number>,
  loss: () => number,
  indices: readonly number[] = [...input.keys()],
): string[] {
  const bad: string[] = [];
  for (const i of indices) {
    const x0 = input[i];
    input[i] = x0 + H;
    const up = loss();
    input[i] = x0 - H;
    const down = loss();
    input[i] = x0;
    const numeric = (up - down) / (2 * H);
    const a = analytic[i];
    if (!(Math.abs(a - numeric) <= ABS_TOL + REL_TOL * Math.abs(numeric))) {
      bad.push(`[${i}] analytic ${a}, numeric ${numeric}`);
    }
  }
  return bad;
}

/** Largest |g[i]| over the listed indices: guards against a check passing on all-zero gradients. */
export function maxAbs(g: ArrayLike<number>, indices?: readonly number[]): number {
  let m = 0;
  const idx = indices ?? Array.from({ length: g.length }, (_, i) => i);
  for (const i of idx) m = Math.max(m, Math.abs(g[i]));
  return m;
}

export type Values = Record<string, Float64Array>;

export function call<A>(kernel: OracleKernel<A>, dims: Record<string, unknown>, values: Values): Values {
  kernel(dims as unknown as A, values);
  return values;
}

/** Asserts the analytic gradient matches finite differences and is not trivially zero. */
export function expectGradient(
  what: string,
  input: Float64Array,
  analytic: ArrayLike<number>,
  loss: () => number,
  indices?: readonly number[],
): void {
  expect(gradientMismatches(input, analytic, loss, indices), what).toEqual([]);
  expect(maxAbs(analytic, indices), `${what} is all zero`).toBeGreaterThan(1e-3);
}

/** Checks that `after` equals `before` plus `grad`, element by element. */
export function expectAccumulated(after: Float64Array, before: Float64Array, grad: Float64Array): void {
  const expected = before.map((b, i) => b + grad[i]);
  const bad = [...after.keys()].filter((i) => Math.abs(after[i] - expected[i]) > 1e-12 * (1 + Math.abs(expected[i])));
  expect(bad, "elements that did not accumulate").toEqual([]);
}


/** Groups one forward kernel's finite-difference checks under "forward -> backward". */
export function forwardKernel(name: keyof typeof BACKWARD_OF, body: () => void): void {
  describe(`${name} -> ${BACKWARD_OF[name]}`, body);
}
