import type { Backend, BufferHandle } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

// mamba3ScanBackward's dBBias, dCBias, dDtBias, dALog and dD are sums over (batch, time):
// each (batch, head) sums its own in a fixed order and the partials are added over the
// batch in order, once, so repeated calls, and 1 or 2 threads, give the same bits (and so
// do dX, dDt, dLambda, dTheta, dB, dC, y and the saved states, each written by one thread).
describe("mamba3Scan results are deterministic", () => {
  const backends: Backend[] = [];
  beforeAll(async () => {
    for (const threads of [1, 2]) backends.push(await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false }));
  });
  afterAll(() => backends.forEach((b) => b.dispose()));

  const dims = { batch: 3, seqLen: 77, heads: 4, headDim: 12, groups: 2, stateSize: 10, chunkSize: 16, xRowStride: 53, dtRowStride: 6, bcRowStride: 23 };
  const rows = dims.batch * dims.seqLen;
  const values = (seed: number, n: number, lo = -1.5, hi = 1.5) =>
    Float32Array.from({ length: n }, (_, i) => lo + ((Math.sin((i + 1) * seed) + 1) / 2) * (hi - lo));

  async function run(backend: Backend, rotates: boolean): Promise<string> {
    const handles: BufferHandle[] = [];
    const buf = (data: Float32Array) => {
      const b = backend.alloc(data.byteLength);
      backend.upload(b, data);
      handles.push(b);
      return b;
    };
    const zeros = (n: number) => buf(new Float32Array(n));
    const { heads, headDim, stateSize } = dims;
    const inputs = {
      x: buf(values(1.7, rows * dims.xRowStride)),
      dt: buf(values(0.37, rows * dims.dtRowStride, -4, 1)),
      lambda: buf(values(0.73, rows * heads, -4, 4)),
      ...(rotates ? { theta: buf(values(1.1, (rows * heads * stateSize) / 2, -0.5, 0.5)) } : {}),
      B: buf(values(0.9, rows * dims.bcRowStride)),
      C: buf(values(2.3, rows * dims.bcRowStride)),
      bBias: buf(values(0.41, heads * stateSize)),
      cBias: buf(values(0.53, heads * stateSize)),
      dtBias: buf(values(2.9, heads, -1, 0.5)),
      aLog: buf(values(1.3, heads, -1, 1.5)),
      D: buf(values(3.1, heads)),
    };
    const dY = buf(values(0.61, rows * heads * headDim));
    const y = zeros(rows * heads * headDim);
    const states = zeros(dims.batch * heads * Math.ceil(dims.seqLen / dims.chunkSize) * headDim * stateSize);
    backend.kernels.mamba3ScanForward({ ...dims, ...inputs, y, states, dtype: "f32" });
    const grads = {
      dX: zeros(rows * dims.xRowStride),
      dDt: zeros(rows * dims.dtRowStride),
      dLambda: zeros(rows * heads),
      ...(rotates ? { dTheta: zeros((rows * heads * stateSize) / 2) } : {}),
      dB: zeros(rows * dims.bcRowStride),
      dC: zeros(rows * dims.bcRowStride),
      dBBias: buf(new Float32Array(heads * stateSize).fill(0.75)),
      dCBias: buf(new Float32Array(heads * stateSize).fill(-0.25)),
      dDtBias: buf(new Float32Array(heads).fill(0.25)),
      dALog: buf(new Float32Array(heads).fill(-0.5)),
      dD: buf(new Float32Array(heads).fill(1.5)),
    };
    backend.kernels.mamba3ScanBackward({ ...dims, ...inputs, dY, states, ...grads, dtype: "f32" });
    const parts: string[] = [];
    for (const h of [y, states, ...Object.values(grads)]) {
      const out = new Uint32Array(h.byteLength / 4);
      await backend.download(h, out);
      parts.push(out.join(","));
    }
    handles.forEach((h) => backend.free(h));
    expect(parts.every((p) => p.length > 0 && !p.split(",").every((w) => w === "0"))).toBe(true);
    return parts.join("|");
  }

  for (const rotates of [true, false]) {
    it(`bit-identical outputs and parameter gradients over repeated calls and thread counts${rotates ? ", with the rotation" : ""}`, async () => {
      const results: string[] = [];
      for (const backend of backends) for (let i = 0; i < 3; i++) results.push(await run(backend, rotates));
      expect(new Set(results).size).toBe(1);
    });
  }
});
