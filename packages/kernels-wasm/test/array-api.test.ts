import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { oracle } from "@kiln/contract";
import { seededRandom } from "@kiln/contract/conformance";
import { type Kernels, createKernels } from "@kiln/kernels-wasm";

const rand = seededRandom(42);
const randoms = (n: number, lo = -1, hi = 1) => Float32Array.from({ length: n }, () => lo + (hi - lo) * rand());
const f64 = (x: ArrayLike<number>) => Float64Array.from(x);

/** Runs an oracle kernel on f64 copies; returns the outputs it wrote. */
function reference(kernel: keyof typeof oracle, args: Record<string, unknown>, inputs: Record<string, ArrayLike<number>>, outputs: Record<string, number>) {
  const v: Record<string, Float64Array> = {};
  for (const [k, x] of Object.entries(inputs)) v[k] = f64(x);
  for (const [k, n] of Object.entries(outputs)) v[k] = new Float64Array(n);
  (oracle[kernel] as (a: unknown, v: Record<string, Float64Array>) => void)(args, v);
  return v;
}

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol = 2e-5) {
  expect(actual.length).toBe(expected.length);
  let scale = 1;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]));
  for (let i = 0; i < expected.length; i++) expect(Math.abs(actual[i] - expected[i]), `[${i}]`).toBeLessThan(tol * scale);
}

let k: Kernels;
beforeAll(async () => {
  k = await createKernels({ threads: 2 });
});
afterAll(() => k.dispose());

describe("the Float32Array API", () => {
  it("softmax with temperature", () => {
    const x = randoms(7 * 131, -5, 5);
    expectClose(k.softmax(x, 131, 0.7), reference("softmaxForward", { rows: 7, dim: 131, temperature: 0.7 }, { x }, { out: x.length }).out);
  });

  it("layerNorm and rmsNorm, with their statistics", () => {
    const x = randoms(9 * 67), w = randoms(67), b = randoms(67);
    const ln = k.layerNorm(x, w, b);
    const want = reference("layerNormForward", { rows: 9, dim: 67, eps: 1e-5 }, { x, weight: w, bias: b }, { out: x.length, mean: 9, rstd: 9 });
    expectClose(ln.out, want.out);
    expectClose(ln.rstd, want.rstd);
    const rms = k.rmsNorm(x, w);
    expectClose(rms.out, reference("rmsNormForward", { rows: 9, dim: 67, eps: 1e-6 }, { x, weight: w }, { out: x.length, rstd: 9 }).out);
  });

  it("gelu, silu, swiGlu, add, scale, sum, sumSquares", () => {
    const x = randoms(1001, -4, 4), y = randoms(1001);
    expectClose(k.gelu(x), reference("geluForward", { n: 1001 }, { x }, { out: 1001 }).out);
    expectClose(k.silu(x), reference("siluForward", { n: 1001 }, { x }, { out: 1001 }).out);
    expectClose(k.swiGlu(x, y), reference("swiGluForward", { n: 1001 }, { gate: x, up: y }, { out: 1001 }).out);
    expectClose(k.add(x, y), Array.from(x, (v, i) => v + y[i]));
    expectClose(k.scale(x, -0.5), Array.from(x, (v) => -0.5 * v));
    expect(k.sum(y)).toBeCloseTo(y.reduce((a, b) => a + b, 0), 3);
    expect(k.sumSquares(y)).toBeCloseTo(y.reduce((a, b) => a + b * b, 0), 3);
  });

  it("rope and causal attention with grouped kv heads", () => {
    const shape = { batch: 2, seqLen: 9, heads: 4, kvHeads: 2, headDim: 8 };
    const q = randoms(2 * 9 * 4 * 8), kk = randoms(2 * 9 * 2 * 8), v = randoms(2 * 9 * 2 * 8);
    expectClose(k.rope(q, { ...shape, theta: 10000 }), reference("ropeForward", { ...shape, theta: 10000 }, { x: q }, { out: q.length }).out);
    const got = k.attention(q, kk, v, shape);
    const want = reference("attentionForward", shape, { q, k: kk, v }, { out: q.length, lse: 2 * 4 * 9 });
    expectClose(got.out, want.out);
    expectClose(got.lse, want.lse);
  });

  it("causal attention with a value head size apart from the query/key one", () => {
    const shape = { batch: 2, seqLen: 7, heads: 4, kvHeads: 2, headDim: 6, vHeadDim: 10 };
    const q = randoms(2 * 7 * 4 * 6), kk = randoms(2 * 7 * 2 * 6), v = randoms(2 * 7 * 2 * 10);
    const got = k.attention(q, kk, v, shape);
    const want = reference("attentionForward", shape, { q, k: kk, v }, { out: 2 * 7 * 4 * 10, lse: 2 * 4 * 7 });
    expect(got.out.length).toBe(2 * 7 * 4 * 10);
    expectClose(got.out, want.out);
    expectClose(got.lse, want.lse);
  });

  it("cross-entropy with an ignored target", () => {
    const logits = randoms(5 * 50, -3, 3);
    const targets = Int32Array.from([3, -1, 49, 0, 7]);
    const got = k.crossEntropy(logits, targets);
    expectClose(got.losses, reference("crossEntropyForward", { rows: 5, vocab: 50 }, { logits, targets }, { losses: 5, lse: 5 }).losses);
    expect(got.losses[1]).toBe(0);
  });

  it("AdamW updates param, m and v in place", () => {
    const p = randoms(300), g = randoms(300), m = new Float32Array(300), v = new Float32Array(300);
    const want = reference("adamW", { n: 300, lr: 1e-2, step: 1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 }, { param: p, grad: g, m, v }, {});
    k.adamW(p, g, m, v, { lr: 1e-2, step: 1, weightDecay: 0.1 });
    expectClose(p, want.param);
    expectClose(m, want.m);
    expectClose(v, want.v);
  });

  it("refuses an input whose length does not fit the shape", () => {
    expect(() => k.softmax(new Float32Array(10), 3)).toThrow(/length 10 is not a multiple of dim 3/);
  });
});
