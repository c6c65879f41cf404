import type { OracleKernel } from "../../src/oracle/types.js";

export type Values = Record<string, Float64Array>;

/**
 * Runs an oracle kernel on plain arrays with dims-only arguments (operand
 * handles are never read by the oracle) and returns the value record, outputs
 * written in place.
 */
export function callOracle<A>(kernel: OracleKernel<A>, dims: Record<string, unknown>, values: Record<string, ArrayLike<number>>): Values {
  const v: Values = {};
  for (const [key, arr] of Object.entries(values)) v[key] = Float64Array.from(arr);
  kernel(dims as unknown as A, v);
  return v;
}

/** Plain array of a typed array, for readable toEqual diffs. */
export const arr = (x: Float64Array): number[] => Array.from(x);

/** Expects every element of `actual` to be within `tol` of `expected` (absolute + relative). */
export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol = 1e-12): void {
  if (actual.length !== expected.length) throw new Error(`length ${actual.length} != ${expected.length}`);
  const bad: string[] = [];
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i], e = expected[i];
    if (!(Math.abs(a - e) <= tol * (1 + Math.abs(e)))) bad.push(`[${i}] got ${a}, expected ${e}`);
  }
  if (bad.length > 0) throw new Error(`mismatch:\n${bad.slice(0, 10).join("\n")}`);
}
