import { expect, it } from "vitest";
import { oracle } from "../src/oracle/index.js";
import { rng, uniform } from "./support/finite-difference.js";

// Mamba3's scan oracle against what it must reduce to: with λ = 1 (no term of the previous
// token), zero B and C biases and no rotation it is Mamba2's scan; a rotation by zero angles
// changes nothing; one token by hand.

const dims = { batch: 2, seqLen: 9, heads: 4, headDim: 3, groups: 2, stateSize: 4, chunkSize: 4, dtype: "f32" } as const;
const rows = dims.batch * dims.seqLen, H = dims.heads, N = dims.stateSize, P = dims.headDim;

function inputs(seed: number) {
  const r = rng(seed);
  return {
    x: uniform(r, rows * H * P),
    dt: uniform(r, rows * H, -2, 1),
    lambda: uniform(r, rows * H, -3, 3),
    B: uniform(r, rows * dims.groups * N),
    C: uniform(r, rows * dims.groups * N),
    bBias: uniform(r, H * N),
    cBias: uniform(r, H * N),
    dtBias: uniform(r, H),
    aLog: uniform(r, H),
    D: uniform(r, H),
    states: new Float64Array(dims.batch * H * 3 * P * N),
  };
}

const y = (extra: Record<string, Float64Array>) => {
  const v = { ...extra, y: new Float64Array(rows * H * P) };
  oracle.mamba3ScanForward(dims as never, v as never);
  return v.y;
};

it("λ = 1 with zero biases and no rotation is Mamba2's scan", () => {
  const v = { ...inputs(1), lambda: new Float64Array(rows * H).fill(60), bBias: new Float64Array(H * N), cBias: new Float64Array(H * N) };
  const ssd = { ...v, y: new Float64Array(rows * H * P) };
  oracle.ssdScanForward(dims as never, ssd as never);
  const got = y(v);
  for (let i = 0; i < got.length; i++) expect(got[i]).toBeCloseTo(ssd.y[i], 12);
});

it("a rotation by zero angles changes nothing; a nonzero one does", () => {
  const v = inputs(2);
  const plain = y(v);
  expect([...y({ ...v, theta: new Float64Array((rows * H * N) / 2) })]).toEqual([...plain]);
  expect(y({ ...v, theta: new Float64Array((rows * H * N) / 2).fill(0.3) })[H * P]).not.toBeCloseTo(plain[H * P], 3);
});

it("two tokens by hand: y_1 = (α_1 γ_0 x_0 B̄_0ᵀ + β_1 x_0 B̄_0ᵀ + γ_1 x_1 B̄_1ᵀ) C̄_1 + D x_1", () => {
  const one = { batch: 1, seqLen: 2, heads: 1, headDim: 1, groups: 1, stateSize: 1, chunkSize: 1, dtype: "f32" };
  const v = {
    x: Float64Array.of(2, -1),
    dt: Float64Array.of(0, 0.5),
    lambda: Float64Array.of(0, 1),
    B: Float64Array.of(0.5, 1.5),
    C: Float64Array.of(1, -2),
    bBias: Float64Array.of(1),
    cBias: Float64Array.of(1),
    dtBias: Float64Array.of(0.25),
    aLog: Float64Array.of(0),
    D: Float64Array.of(0.5),
    states: new Float64Array(2),
    y: new Float64Array(2),
  };
  oracle.mamba3ScanForward(one as never, v as never);
  const sp = (u: number) => Math.log1p(Math.exp(u)), sg = (u: number) => 1 / (1 + Math.exp(-u));
  const d0 = sp(0.25), d1 = sp(0.75), l0 = sg(0), l1 = sg(1);
  const a1 = Math.exp(-d1);
  const s0 = l0 * d0 * 2 * 1.5;
  const s1 = a1 * s0 + (1 - l1) * d1 * a1 * 2 * 1.5 + l1 * d1 * -1 * 2.5;
  expect(v.y[0]).toBeCloseTo(s0 * 2 + 0.5 * 2, 12);
  expect(v.y[1]).toBeCloseTo(s1 * -1 + 0.5 * -1, 12);
  // The state entering chunk 1 is G_0 = S_0 + μ_0 x_0 B̄_0ᵀ, μ_0 = (1 - λ_1) Δ_1.
  expect(v.states[1]).toBeCloseTo(s0 + (1 - l1) * d1 * 2 * 1.5, 12);
});
