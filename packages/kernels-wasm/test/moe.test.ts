import { type Backend, type BufferHandle, KernelArgumentError, decodeElements, encodeToBytes } from "@kiln/contract";
import { TOLERANCES, compareValues } from "@kiln/contract/conformance";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

// The mixture-of-experts kernels beyond the conformance suite: the same bits
// whatever the thread count, ties broken by the lower expert index in wide rows,
// and indices that would address memory outside an operand refused up front.

const values = (seed: number, n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin((i + 1) * seed) * 1.5);

/** bf16 bits of f32 values, by truncation (test data, not a conversion under test). */
const bf16 = (x: Float32Array) => Uint16Array.from(new Uint32Array(x.buffer), (u) => u >>> 16);

type Data = Float32Array | Uint16Array | Int32Array;

/** Uploads `inputs`, allocates `outputs` (bytes, zero-filled), runs `call` and returns every buffer's bytes as hex. */
async function runOnce(backend: Backend, inputs: Record<string, Data>, outputs: Record<string, number>, call: (b: Record<string, BufferHandle>) => void) {
  const bufs: Record<string, BufferHandle> = {};
  for (const [key, data] of Object.entries(inputs)) {
    bufs[key] = backend.alloc(data.byteLength);
    backend.upload(bufs[key], data);
  }
  for (const [key, bytes] of Object.entries(outputs)) {
    bufs[key] = backend.alloc(bytes);
    backend.upload(bufs[key], new Uint8Array(bytes));
  }
  try {
    call(bufs);
    const out: Record<string, string> = {};
    for (const key of Object.keys(outputs)) {
      const bytes = new Uint8Array(outputs[key]);
      await backend.download(bufs[key], bytes);
      out[key] = Buffer.from(bytes).toString("hex");
    }
    return out;
  } finally {
    for (const b of Object.values(bufs)) backend.free(b);
  }
}

/** Tokens routed to experts 0..E-1 in order of their logits, ties to the lower index (the contract's rule). */
function topK(logits: Float32Array, T: number, E: number, k: number): Int32Array {
  const out = new Int32Array(T * k);
  for (let t = 0; t < T; t++) {
    const z = logits.subarray(t * E, (t + 1) * E);
    const order = [...Array(E).keys()].sort((x, y) => z[y] - z[x] || x - y);
    out.set(order.slice(0, k), t * k);
  }
  return out;
}

describe("mixture-of-experts kernels", () => {
  const backends: Backend[] = [];
  beforeAll(async () => {
    for (const threads of [1, 2, 3]) backends.push(await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false }));
  });
  afterAll(() => backends.forEach((b) => b.dispose()));

  const T = 997, E = 64, k = 8, dim = 100;
  // Logits on a grid of 5 values: most rows hold many equal logits.
  const logits = values(1.3, T * E).map((v) => Math.round(v * 2) / 2);

  it("moeRoute breaks ties by the lower expert index in 64-wide rows, on every thread count", async () => {
    const want = Buffer.from(new Uint8Array(topK(logits, T, E, k).buffer)).toString("hex");
    for (const backend of backends) {
      const got = await runOnce(backend, { logits }, { probs: T * E * 4, experts: T * k * 4, weights: T * k * 4, offsets: (E + 1) * 4, slots: T * k * 4, auxLoss: 4 }, (b) =>
        backend.kernels.moeRoute({ ...(b as never), tokens: T, numExperts: E, topK: k, alpha: 0.01, dtype: "f32" }),
      );
      expect(got.experts).toBe(want);
    }
  });

  it("every kernel gives the same bits on 1, 2 and 3 threads", async () => {
    const x = values(0.7, T * k * dim);
    const slots = Int32Array.from({ length: T * k }, (_, i) => (i * 7919) % (T * k)); // 7919 is prime to T*k: a permutation
    const scale = values(2.1, T * k);
    const rows = 600, n = 70, kk = 300, groups = 5;
    const offsets = Int32Array.from([0, 100, 100, 350, 590, 600]);
    const runs = async (backend: Backend) => ({
      route: await runOnce(backend, { logits: bf16(logits) }, { probs: T * E * 4, experts: T * k * 4, weights: T * k * 2, offsets: (E + 1) * 4, slots: T * k * 4, auxLoss: 4 }, (b) =>
        backend.kernels.moeRoute({ ...(b as never), tokens: T, numExperts: E, topK: k, alpha: 0.01, dtype: "bf16" }),
      ),
      routeBackward: await runOnce(
        backend,
        { dWeights: values(0.3, T * k), weights: values(0.5, T * k), experts: topK(logits, T, E, k), probs: values(0.9, T * E), offsets: Int32Array.from({ length: E + 1 }, (_, e) => Math.round((e * T * k) / E)) },
        { dLogits: T * E * 4 },
        (b) => backend.kernels.moeRouteBackward({ ...(b as never), tokens: T, numExperts: E, topK: k, alpha: 0.01, auxScale: 2, dtype: "f32" }),
      ),
      combine: await runOnce(backend, { x, slots, scale }, { out: T * dim * 4 }, (b) =>
        backend.kernels.moeCombine({ ...(b as never), tokens: T, topK: k, dim, dtype: "f32" }),
      ),
      scaleGrad: await runOnce(backend, { dOut: values(1.1, T * dim), x, slots }, { dScale: T * k * 4 }, (b) =>
        backend.kernels.moeCombineScaleGrad({ ...(b as never), tokens: T, topK: k, dim, dtype: "f32" }),
      ),
      grouped: await runOnce(backend, { a: bf16(values(0.4, rows * kk)), b: bf16(values(0.6, groups * kk * n)), offsets }, { c: rows * n * 2 }, (b) =>
        backend.kernels.groupedMatmul({ ...(b as never), rows, n, k: kk, groups, transB: true, dtype: "bf16" }),
      ),
      weightGrad: await runOnce(backend, { a: values(0.4, rows * kk), dC: values(0.8, rows * n), offsets }, { dB: groups * n * kk * 4 }, (b) =>
        backend.kernels.groupedMatmulWeightGrad({ ...(b as never), rows, n, k: kk, groups, dtype: "f32" }),
      ),
    });
    const [one, ...more] = await Promise.all(backends.map(runs));
    for (const other of more) expect(other).toEqual(one);
  });

  it("groupedMatmulWeightGrad sums groups longer than one k block (600 rows) in bf16 and f16", async () => {
    const rows = 700, n = 9, kk = 20, groups = 2;
    const offsets = Int32Array.from([0, 600, 700]);
    const a = values(0.4, rows * kk), dC = values(0.8, rows * n), dB = values(0.2, groups * n * kk);
    for (const dtype of ["bf16", "f16"] as const) {
      const enc = (x: Float32Array) => encodeToBytes(x, dtype);
      const [av, cv, bv] = [a, dC, dB].map((x) => decodeElements(enc(x), dtype, x.length));
      const want = new Float64Array(bv);
      for (let g = 0; g < groups; g++)
        for (let j = 0; j < n; j++)
          for (let p = 0; p < kk; p++)
            for (let r = offsets[g]; r < offsets[g + 1]; r++) want[g * n * kk + j * kk + p] += cv[r * n + j] * av[r * kk + p];
      const backend = backends[1];
      const bufs = [enc(a), enc(dC), enc(dB), new Uint8Array(offsets.buffer)].map((bytes) => {
        const b = backend.alloc(bytes.byteLength);
        backend.upload(b, bytes);
        return b;
      });
      backend.kernels.groupedMatmulWeightGrad({ a: bufs[0], dC: bufs[1], dB: bufs[2], offsets: bufs[3], rows, n, k: kk, groups, dtype });
      const got = new Uint8Array(groups * n * kk * 2);
      await backend.download(bufs[2], got);
      const gotValues = decodeElements(got, dtype, groups * n * kk);
      const { count } = compareValues(gotValues, decodeElements(encodeToBytes(want, dtype), dtype, want.length), TOLERANCES[dtype]);
      expect(count).toBe(0);
      bufs.forEach((b) => backend.free(b));
    }
  });

  it("refuses group offsets, slots and experts that would address rows outside their operands", () => {
    const backend = backends[1];
    const buf = (data: Data) => {
      const b = backend.alloc(data.byteLength);
      backend.upload(b, data);
      return b;
    };
    const a = buf(new Float32Array(12)), b = buf(new Float32Array(24)), c = buf(new Float32Array(8));
    for (const bad of [[0, 3, 2], [0, 1, 5], [1, 2, 4]]) {
      const offsets = buf(Int32Array.from(bad));
      expect(() => backend.kernels.groupedMatmul({ a, b, c, offsets, rows: 4, n: 2, k: 3, groups: 2, dtype: "f32" })).toThrow(KernelArgumentError);
      expect(() => backend.kernels.groupedMatmulWeightGrad({ a, dC: c, dB: b, offsets, rows: 4, n: 2, k: 3, groups: 2, dtype: "f32" })).toThrow(/do not split 4 rows into 2 groups/);
    }
    const slots = buf(Int32Array.from([0, 4, 1, 2])); // T*k = 4: slot 4 is out of range
    const x = buf(new Float32Array(4 * 3)), out = buf(new Float32Array(4 * 3));
    expect(() => backend.kernels.moeDispatch({ x, slots, out, tokens: 2, topK: 2, dim: 3, dtype: "f32" })).toThrow(/index 4 at position 1/);
    expect(() => backend.kernels.moeCombine({ x, slots, out, tokens: 2, topK: 2, dim: 3, dtype: "f32" })).toThrow(KernelArgumentError);
    const experts = buf(Int32Array.from([0, -1]));
    const probs = buf(new Float32Array(4)), dLogits = buf(new Float32Array(4)), w = buf(new Float32Array(2)), offs = buf(Int32Array.from([0, 1, 2]));
    expect(() =>
      backend.kernels.moeRouteBackward({ dWeights: w, weights: w, experts, probs, offsets: offs, dLogits, tokens: 2, numExperts: 2, topK: 1, alpha: 0, auxScale: 1, dtype: "f32" }),
    ).toThrow(/index -1 at position 1/);
  });
});
