import type { Backend } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

// conv1dCausalBackward's dWeight and dBias are sums over (batch, time): each is one
// thread's fixed-order sum, so repeated calls, and 1 or 2 threads, give the same bits.
describe("conv1dCausalBackward parameter gradients are deterministic", () => {
  const backends: Backend[] = [];
  beforeAll(async () => {
    for (const threads of [1, 2]) backends.push(await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false }));
  });
  afterAll(() => backends.forEach((b) => b.dispose()));

  const batch = 3, seqLen = 257, channels = 203, kernelSize = 4, rowStride = 250;
  const values = (seed: number, n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin((i + 1) * seed) * 1.5);

  async function run(backend: Backend): Promise<string> {
    const buf = (data: Float32Array) => {
      const b = backend.alloc(data.byteLength);
      backend.upload(b, data);
      return b;
    };
    const rows = batch * seqLen;
    const x = buf(values(1.7, rows * rowStride));
    const dOut = buf(values(2.3, rows * channels));
    const weight = buf(values(0.9, channels * kernelSize));
    const dX = backend.alloc(rows * channels * 4);
    const dWeight = backend.alloc(channels * kernelSize * 4);
    const dBias = backend.alloc(channels * 4);
    backend.upload(dWeight, new Float32Array(channels * kernelSize).fill(0.25));
    backend.upload(dBias, new Float32Array(channels).fill(-0.5));
    backend.kernels.conv1dCausalBackward({ dOut, x, weight, dX, dWeight, dBias, batch, seqLen, channels, kernelSize, rowStride, dtype: "f32" });
    const w = new Uint32Array(channels * kernelSize);
    const b = new Uint32Array(channels);
    await backend.download(dWeight, w);
    await backend.download(dBias, b);
    for (const h of [x, dOut, weight, dX, dWeight, dBias]) backend.free(h);
    return `${w.join(",")}|${b.join(",")}`;
  }

  it("bit-identical dWeight and dBias over repeated calls and thread counts", async () => {
    const results: string[] = [];
    for (const backend of backends) for (let i = 0; i < 3; i++) results.push(await run(backend));
    expect(new Set(results).size).toBe(1);
  });
});
