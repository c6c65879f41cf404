import { expect, it } from "vitest";
import { oracle } from "../src/oracle/index.js";
import { arr, callOracle, expectClose } from "./support/call-oracle.js";
import { rng, uniform } from "./support/finite-difference.js";
import { kernel } from "./support/hand-kernel.js";

// Mamba3's scan oracle by hand and against what it must reduce to: with λ = 1 (no term of the
// previous token), zero B and C biases and no rotation it is Mamba2's scan; a rotation by zero
// angles changes nothing (the coverage check is in oracle-hand.test.ts).

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

kernel("mamba3ScanForward", () => {
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
});

kernel("mamba3ScanBackward", () => {
  // One head, headDim 1, state 1, two tokens, no rotation: Δ = softplus(0) = ln2, A = -1 so
  // α = 1/2, λ = sigmoid(0) = 1/2 so γ = ln2/2 and β = ln2/4; x = (2, 4), B = (1, 3), C = (5, 7), D = 1/2.
  //   S0 = γ x0 B0 = ln2, S1 = α S0 + β x0 B0 + γ x1 B1 = 7 ln2.  With dY = (1, 1):
  //   dS1 = C1 = 7, dS0 = α dS1 + C0 = 8.5
  //   dx0 = D + γ dS0 B0 + β dS1 B0 = 1/2 + 6 ln2,  dx1 = D + γ dS1 B1 = 1/2 + 10.5 ln2
  //   dB0 = γ dS0 x0 + β dS1 x0 = 12 ln2, dB1 = γ dS1 x1 = 14 ln2;  dC_t = S_t: ln2, 7 ln2
  //   dγ = (17, 84), dβ1 = dS1 x0 B0 = 14, dα1 = dS1 S0 = 7 ln2
  //   dΔ0 = λ dγ0 = 8.5;  dΔ1 = dα1 α A + dβ1 (1-λ)(α + Δ α A) + λ dγ1 = 45.5 - 7 ln2;  dDt = dΔ/2
  //   dλ0 = Δ dγ0 = 17 ln2, dλ1 = -dβ1 Δ α + Δ dγ1 = 77 ln2;  dLambda = dλ λ(1-λ) = dλ/4
  //   dA = dα1 α Δ + dβ1 (1-λ) Δ α Δ = 7 ln²2, dALog = A dA;  dD = x0 + x1 = 6
  it("gives every gradient, accumulating the per-head ones", () => {
    const L = Math.LN2;
    const v = callOracle(
      oracle.mamba3ScanBackward,
      { batch: 1, seqLen: 2, heads: 1, headDim: 1, groups: 1, stateSize: 1, chunkSize: 1 },
      {
        x: [2, 4],
        dt: [0.25, 0.25],
        dtBias: [-0.25],
        lambda: [0, 0],
        aLog: [0],
        B: [1, 3],
        C: [5, 7],
        bBias: [0],
        cBias: [0],
        D: [0.5],
        dY: [1, 1],
        states: [0, 0],
        dX: [0, 0],
        dDt: [0, 0],
        dLambda: [0, 0],
        dB: [0, 0],
        dC: [0, 0],
        dBBias: [1],
        dCBias: [1],
        dDtBias: [1],
        dALog: [1],
        dD: [1],
      },
    );
    expectClose(arr(v.dX), [0.5 + 6 * L, 0.5 + 10.5 * L]);
    expectClose(arr(v.dB), [12 * L, 14 * L]);
    expectClose(arr(v.dC), [L, 7 * L]);
    expectClose(arr(v.dDt), [4.25, 22.75 - 3.5 * L]);
    expectClose(arr(v.dLambda), [4.25 * L, 19.25 * L]);
    expectClose(arr(v.dBBias), [1 + 26 * L]);
    expectClose(arr(v.dCBias), [1 + 8 * L]);
    expectClose(arr(v.dDtBias), [1 + 27 - 3.5 * L]);
    expectClose(arr(v.dALog), [1 - 7 * L * L]);
    expectClose(arr(v.dD), [1 + 6]);
  });
});
