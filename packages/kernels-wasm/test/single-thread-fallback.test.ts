import { describe, expect, it } from "vitest";
import { createKernels } from "../src/index.js";
import { randomArray, referenceMatmul } from "./reference-matmul.js";

// Browsers without cross-origin isolation have no SharedArrayBuffer; the
// kernels then load the unshared-memory build and run on the calling thread.
describe("without SharedArrayBuffer", () => {
  it("falls back to one thread on an unshared memory and says why", async () => {
    const saved = globalThis.SharedArrayBuffer;
    // @ts-expect-error: hiding the global for this test only
    delete globalThis.SharedArrayBuffer;
    try {
      const kernels = await createKernels({ threads: 4 });
      expect(kernels.info.threads).toBe(1);
      expect(kernels.info.sharedMemory).toBe(false);
      expect(kernels.info.threadLimitReason).toMatch(/SharedArrayBuffer is unavailable/);
      const o = { m: 13, n: 29, k: 300, transB: true };
      const a = randomArray(o.m * o.k, 1);
      const b = randomArray(o.k * o.n, 2);
      const got = kernels.matmul(a, b, o);
      const want = referenceMatmul(a, b, o);
      for (let i = 0; i < got.length; i++) expect(Math.abs(got[i] - want.c[i])).toBeLessThan(1e-4 * (1 + want.magnitude[i]));
      await kernels.dispose();
    } finally {
      globalThis.SharedArrayBuffer = saved;
    }
  });
});
