import type { Backend, BufferHandle } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

// ssdScanBackward's dDtBias, dALog and dD are sums over (batch, time): each (batch, head)
// sums its own in a fixed order and the partials are added over the batch in order, once,
// so repeated calls, and 1 or 2 threads, give the same bits (and so do dX, dDt, dB, dC,
// y and the saved states, each written by one thread).
describe("ssdScan results are deterministic", () => {
  const backends: Backend[] = [];
  beforeAll(async () => {
    for (const threads of [1, 2]) backends.push(await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false }));
  });
  afterAll(() => backends.forEach((b) => b.dispose()));

  const dims = { batch: 3, seqLen: 77, heads: 4, headDim: 12, groups: 2, stateSize: 10, chunkSize: 16, xRowStride: 53, dtRowStride: 6, bcRowStride: 23 };
  const rows = dims.batch * dims.seqLen;
  const values = (seed: number, n: number, lo = -1.5, hi = 1.5) =>
    Float32Array.from({ length: n }, (_, i) => lo + ((Math.sin((i + 1) * seed) + 1) / 2) * (hi - lo));

  async function run(backend: Backend): Promise<string> {
    const handles: BufferHandle[] = [];
    const buf = (data: Float32Array) => {
      const b = backend.alloc(data.byteLength);
      backend.upload(b, data);
      handles.push(b);
      return b;
    };
    const zeros = (n: number) => buf(new Float32Array(n));
    const { heads, headDim } = dims;
    const x = buf(values(1.7, rows * dims.xRowStride));
    const dt = buf(values(0.37, rows * dims.dtRowStride, -4, 1));
    const dtBias = buf(values(2.9, heads, -1, 0.5));
    const aLog = buf(values(1.3, heads, -1, 1.5));
    const B = buf(values(0.9, rows * dims.bcRowStride));
    const C = buf(values(2.3, rows * dims.bcRowStride));
    const D = buf(values(3.1, heads));
    const dY = buf(values(0.61, rows * heads * headDim));
    const y = zeros(rows * heads * headDim);
    const states = zeros(dims.batch * heads * Math.ceil(dims.seqLen / dims.chunkSize) * headDim * dims.stateSize);
    backend.kernels.ssdScanForward({ ...dims, x, dt, dtBias, aLog, B, C, D, y, states, dtype: "f32" });
    const dX = zeros(rows * dims.xRowStride);
    const dDt = zeros(rows * dims.dtRowStride);
    const dB = zeros(rows * dims.bcRowStride);
    const dC = zeros(rows * dims.bcRowStride);
    const dDtBias = buf(new Float32Array(heads).fill(0.25));
    const dALog = buf(new Float32Array(heads).fill(-0.5));
    const dD = buf(new Float32Array(heads).fill(1.5));
    backend.kernels.ssdScanBackward({ ...dims, dY, x, dt, dtBias, aLog, B, C, D, states, dX, dDt, dB, dC, dDtBias, dALog, dD, dtype: "f32" });
    const parts: string[] = [];
    for (const h of [y, states, dX, dDt, dB, dC, dDtBias, dALog, dD]) {
      const out = new Uint32Array(h.byteLength / 4);
      await backend.download(h, out);
      parts.push(out.join(","));
    }
    handles.forEach((h) => backend.free(h));
    expect(parts.every((p) => p.length > 0 && !p.split(",").every((w) => w === "0"))).toBe(true);
    return parts.join("|");
  }

  it("bit-identical outputs and parameter gradients over repeated calls and thread counts", async () => {
    const results: string[] = [];
    for (const backend of backends) for (let i = 0; i < 3; i++) results.push(await run(backend));
    expect(new Set(results).size).toBe(1);
  });
});
