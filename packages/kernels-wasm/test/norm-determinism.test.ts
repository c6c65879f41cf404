import type { Backend } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

// Parameter gradients are sums over rows computed by several threads: the result
// must not depend on timing, so repeated calls give the same bits.
describe("norm backward parameter gradients are deterministic", () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await createWasmBackend({ threads: 2, minFlopsPerThread: 0, measurePeak: false });
  });
  afterAll(() => backend.dispose());

  const rows = 2048, dim = 384;
  const values = (seed: number, n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin((i + 1) * seed) * 1.5);

  for (const kernel of ["layerNormBackward", "rmsNormBackward"] as const) {
    it(`${kernel}: bit-identical dWeight${kernel === "layerNormBackward" ? " and dBias" : ""} over repeated calls`, async () => {
      const buf = (data: Float32Array) => {
        const b = backend.alloc(data.byteLength);
        backend.upload(b, data);
        return b;
      };
      const x = buf(values(1.7, rows * dim));
      const dOut = buf(values(2.3, rows * dim));
      const weight = buf(values(0.9, dim));
      const mean = buf(values(0.1, rows).map((v) => v * 0.01));
      const rstd = buf(values(0.3, rows).map((v) => 1 + Math.abs(v)));
      const dX = backend.alloc(rows * dim * 4);
      const dWeight = backend.alloc(dim * 4);
      const dBias = backend.alloc(dim * 4);
      const results: string[] = [];
      for (let run = 0; run < 5; run++) {
        backend.upload(dWeight, new Float32Array(dim).fill(0.25));
        backend.upload(dBias, new Float32Array(dim).fill(-0.5));
        if (kernel === "layerNormBackward") backend.kernels.layerNormBackward({ dOut, x, weight, mean, rstd, dX, dWeight, dBias, rows, dim, dtype: "f32" });
        else backend.kernels.rmsNormBackward({ dOut, x, weight, rstd, dX, dWeight, rows, dim, dtype: "f32" });
        const w = new Uint32Array(dim);
        const b = new Uint32Array(dim);
        await backend.download(dWeight, w);
        await backend.download(dBias, b);
        results.push(`${w.join(",")}|${b.join(",")}`);
      }
      expect(new Set(results).size).toBe(1);
      for (const b of [x, dOut, weight, mean, rstd, dX, dWeight, dBias]) backend.free(b);
    });
  }
});
