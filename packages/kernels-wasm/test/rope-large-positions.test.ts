import type { Backend } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

// Angles p * theta^(-2i/headDim) reach 1e6 radians at position 1e6: the kernel must
// form and reduce them in f64 to keep f32 accuracy.
describe("rope at large positions", () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await createWasmBackend({ threads: 2, minFlopsPerThread: 0, measurePeak: false });
  });
  afterAll(() => backend.dispose());

  for (const [posOffset, theta] of [
    [1_000_000, 10_000],
    [3_000_000, 500_000],
    [123_456_789, 10_000],
  ] as const) {
    it(`matches f64 rotation at positions from ${posOffset} (theta ${theta})`, async () => {
      const batch = 2, seqLen = 5, heads = 3, headDim = 64, half = headDim / 2;
      const n = batch * seqLen * heads * headDim;
      const x = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 12.9898) * 0.9);
      const bx = backend.alloc(n * 4);
      const bo = backend.alloc(n * 4);
      backend.upload(bx, x);
      const out = new Float32Array(n);
      for (const [kernel, sign] of [["ropeForward", 1], ["ropeBackward", -1]] as const) {
        backend.kernels[kernel]({ x: bx, out: bo, batch, seqLen, heads, headDim, posOffset, theta, dtype: "f32" });
        await backend.download(bo, out);
        let worst = 0;
        for (let r = 0; r < batch * seqLen; r++) {
          const pos = posOffset + (r % seqLen);
          for (let h = 0; h < heads; h++) {
            const o = (r * heads + h) * headDim;
            for (let i = 0; i < half; i++) {
              const a = sign * pos * theta ** ((-2 * i) / headDim);
              const c = Math.cos(a), s = Math.sin(a);
              worst = Math.max(worst, Math.abs(out[o + i] - (x[o + i] * c - x[o + i + half] * s)));
              worst = Math.max(worst, Math.abs(out[o + i + half] - (x[o + i + half] * c + x[o + i] * s)));
            }
          }
        }
        expect(worst, kernel).toBeLessThan(1e-6);
      }
      backend.free(bx);
      backend.free(bo);
    });
  }
});
