import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKernels, type Kernels, type MatmulArrays } from "../src/index.js";
import { randomArray, referenceMatmul } from "./reference-matmul.js";

type Case = { name: string } & Omit<MatmulArrays, "bias" | "out"> & { bias?: boolean; accumulate?: boolean };

const cases: Case[] = [
  { name: "1x1x1", m: 1, n: 1, k: 1 },
  { name: "primes 7x13x37", m: 7, n: 13, k: 37 },
  { name: "primes 13x7x1", m: 13, n: 7, k: 1 },
  { name: "column 37x1x13", m: 37, n: 1, k: 13 },
  { name: "row 1x37x7", m: 1, n: 37, k: 7 },
  { name: "whole tiles 12x16x8", m: 12, n: 16, k: 8 },
  { name: "k over one block 5x17x300", m: 5, n: 17, k: 300 },
  { name: "97x131x261", m: 97, n: 131, k: 261 },
  { name: "m over one block 211x9x3", m: 211, n: 9, k: 3 },
  { name: "n over one block 3x2053x5", m: 3, n: 2053, k: 5 },
  { name: "transA 13x7x37", m: 13, n: 7, k: 37, transA: true },
  { name: "transB 13x7x37", m: 13, n: 7, k: 37, transB: true },
  { name: "transA transB 29x31x23", m: 29, n: 31, k: 23, transA: true, transB: true },
  { name: "transB 67x45x270", m: 67, n: 45, k: 270, transB: true },
  { name: "transA 45x67x270", m: 45, n: 67, k: 270, transA: true },
  { name: "transA over one block 100x37x300", m: 100, n: 37, k: 300, transA: true },
  { name: "batch 3", m: 7, n: 13, k: 11, batch: 3 },
  { name: "batch 4 transposed", m: 9, n: 5, k: 17, batch: 4, transA: true, transB: true },
  { name: "batch 5 broadcast B", m: 6, n: 10, k: 7, batch: 5, strideB: 0 },
  { name: "batch 2 padded strides", m: 3, n: 5, k: 4, batch: 2, strideA: 15, strideB: 23, strideC: 19 },
  { name: "accumulate", m: 19, n: 23, k: 29, accumulate: true },
  { name: "bias", m: 19, n: 23, k: 29, bias: true },
  { name: "accumulate bias alpha batch", m: 11, n: 21, k: 300, batch: 3, accumulate: true, bias: true, alpha: -0.5 },
  { name: "alpha 0.25 transB", m: 33, n: 17, k: 9, alpha: 0.25, transB: true },
  { name: "one row 1x100x300 bias accumulate alpha", m: 1, n: 100, k: 300, bias: true, accumulate: true, alpha: 0.5 },
  { name: "one row transB 1x50x33", m: 1, n: 50, k: 33, transB: true, bias: true },
  { name: "one row transA transB 1x7x19", m: 1, n: 7, k: 19, transA: true, transB: true },
  { name: "one column transA 53x1x19", m: 53, n: 1, k: 19, transA: true },
  { name: "one column 70x1x40 bias accumulate batch 3", m: 70, n: 1, k: 40, transA: true, bias: true, accumulate: true, batch: 3 },
  { name: "one column transB 29x1x300 bias", m: 29, n: 1, k: 300, transB: true, bias: true, alpha: -2 },
  { name: "batch 4 of one row 1x61x17", m: 1, n: 61, k: 17, batch: 4, strideA: 0 },
  { name: "dot product 1x1x1000", m: 1, n: 1, k: 1000, bias: true },
];

function check(kernels: Kernels, c: Case, seed: number) {
  const batch = c.batch ?? 1;
  const sa = c.strideA ?? c.m * c.k;
  const sb = c.strideB ?? c.k * c.n;
  const sc = c.strideC ?? c.m * c.n;
  const a = randomArray((batch - 1) * sa + c.m * c.k, seed);
  const b = randomArray((batch - 1) * sb + c.k * c.n, seed + 1);
  const options: MatmulArrays = { ...c, bias: undefined, out: undefined };
  if (c.bias) options.bias = randomArray(c.n, seed + 2);
  const out = randomArray((batch - 1) * sc + c.m * c.n, seed + 3);
  if (c.accumulate) options.out = out;
  const expected = referenceMatmul(a, b, { ...options, out: out.slice() });
  const got = kernels.matmul(a, b, options);
  expect(got.length).toBe(expected.c.length);
  let worst = 0;
  for (let bi = 0; bi < batch; bi++) {
    for (let e = 0; e < c.m * c.n; e++) {
      const at = bi * sc + e;
      // f32 accumulation error is at most about k * eps of the magnitudes summed.
      const tol = (c.k + 4) * 2 ** -23 * expected.magnitude[at] + 1e-30;
      worst = Math.max(worst, Math.abs(got[at] - expected.c[at]) / tol);
    }
  }
  expect(worst).toBeLessThanOrEqual(1);
}

for (const threads of [1, 2]) {
  describe(`matmul on ${threads} thread${threads > 1 ? "s" : ""}`, () => {
    let kernels: Kernels;
    beforeAll(async () => {
      kernels = await createKernels({ threads, minFlopsPerThread: 0 });
    });
    afterAll(async () => {
      await kernels.dispose();
    });

    it("reports its setup", () => {
      expect(kernels.info.threads).toBe(threads);
      expect(["relaxed", "plain"]).toContain(kernels.info.simd);
      expect(kernels.info.sharedMemory).toBe(true);
    });

    cases.forEach((c, i) => {
      it(c.name, () => check(kernels, c, 1000 * i + threads));
    });

    it("zero-copy buffers give the same result as the copying call", () => {
      const o = { m: 23, n: 19, k: 41 };
      const a = randomArray(o.m * o.k, 7);
      const b = randomArray(o.k * o.n, 8);
      const ab = kernels.upload(a);
      const bb = kernels.upload(b);
      const cb = kernels.alloc(o.m * o.n);
      kernels.matmulInto({ a: ab, b: bb, c: cb }, o);
      expect(cb.toArray()).toEqual(kernels.matmul(a, b, o));
      for (const buf of [ab, bb, cb]) buf.free();
    });

    it("rejects operands shorter than the shape", () => {
      expect(() => kernels.matmul(new Float32Array(5), new Float32Array(6), { m: 2, n: 3, k: 3 })).toThrow(/a has 5 elements/);
    });
  });
}

describe("plain SIMD build", () => {
  it("matches the reference", async () => {
    const kernels = await createKernels({ threads: 2, simd: "plain", minFlopsPerThread: 0 });
    try {
      expect(kernels.info.simd).toBe("plain");
      // The plain build's 4x8 register tile packs A its own way (whole slivers of four rows).
      const plainCases: Case[] = [
        { name: "97x131x261", m: 97, n: 131, k: 261, transB: true, bias: true },
        { name: "45x67x270", m: 45, n: 67, k: 270 },
        { name: "transA 100x37x300", m: 100, n: 37, k: 300, transA: true },
        { name: "transA transB 29x31x23", m: 29, n: 31, k: 23, transA: true, transB: true },
      ];
      plainCases.forEach((c, i) => check(kernels, c, 5 + 4 * i));
    } finally {
      await kernels.dispose();
    }
  });
});
