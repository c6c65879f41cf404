import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKernels, type Kernels, type MatmulArrays } from "../src/index.js";
import { randomArray, referenceMatmul } from "./reference-matmul.js";

// With several threads an f32 matmul packs each panel of B once, into one of two
// shared buffers, and the threads take blocks of C from a counter (csrc/matmul.c,
// gemm_shared). Each element of C sums the same k blocks in the same order as on one
// thread, so the results must be identical bit for bit, whatever the thread count and
// whichever thread took which block. The shapes reach three or more panels (the two
// buffers reused), two column panels (n > 2048), runs of columns per block (few rows),
// batch items in a row (the counters go on across items), more threads than panels'
// worth of slivers, and every operand option.
type Case = { name: string } & Omit<MatmulArrays, "bias" | "out"> & { bias?: boolean; accumulate?: boolean };

const cases: Case[] = [
  { name: "three k panels 200x150x700", m: 200, n: 150, k: 700 },
  { name: "two column panels 50x2100x300", m: 50, n: 2100, k: 300 },
  { name: "few rows, column runs 40x900x520 transA", m: 40, n: 900, k: 520, transA: true },
  { name: "many row blocks 1000x37x260 transB", m: 1000, n: 37, k: 260, transB: true },
  { name: "batch 3 (a thread short) 97x131x600", m: 97, n: 131, k: 600, batch: 3 },
  { name: "accumulate bias alpha 301x263x513", m: 301, n: 263, k: 513, accumulate: true, bias: true, alpha: -0.75 },
  { name: "fewer slivers than threads 30x11x900", m: 30, n: 11, k: 900, transA: true, transB: true },
];

function inputs(c: Case, seed: number) {
  const batch = c.batch ?? 1;
  const a = randomArray(batch * c.m * c.k, seed);
  const b = randomArray(batch * c.k * c.n, seed + 1);
  const options: MatmulArrays = { ...c, bias: undefined, out: undefined };
  if (c.bias) options.bias = randomArray(c.n, seed + 2);
  const out = randomArray(batch * c.m * c.n, seed + 3);
  return { a, b, options, out };
}

const run = (kernels: Kernels, c: Case, seed: number) => {
  const { a, b, options, out } = inputs(c, seed);
  return kernels.matmul(a, b, c.accumulate ? { ...options, out: out.slice() } : options);
};

describe("f32 matmul on several threads with shared B panels", () => {
  const pools: Record<number, Kernels> = {};
  beforeAll(async () => {
    for (const threads of [1, 2, 3, 4]) pools[threads] = await createKernels({ threads, minFlopsPerThread: 0 });
  });
  afterAll(async () => {
    for (const k of Object.values(pools)) await k.dispose();
  });

  cases.forEach((c, i) => {
    it(`${c.name}: the same bits on 1, 2, 3 and 4 threads, and close to the f64 reference`, () => {
      const one = run(pools[1], c, 100 * i);
      for (const threads of [2, 3, 4]) {
        for (let repeat = 0; repeat < 3; repeat++) {
          const many = run(pools[threads], c, 100 * i);
          expect(Buffer.from(many.buffer).equals(Buffer.from(one.buffer)), `${threads} threads, call ${repeat + 1}`).toBe(true);
        }
      }
      const { a, b, options, out } = inputs(c, 100 * i);
      const expected = referenceMatmul(a, b, { ...options, out: out.slice() });
      let worst = 0;
      for (let e = 0; e < one.length; e++) worst = Math.max(worst, Math.abs(one[e] - expected.c[e]) / ((c.k + 4) * 2 ** -23 * expected.magnitude[e] + 1e-30));
      expect(worst).toBeLessThanOrEqual(1);
    });
  });
});
