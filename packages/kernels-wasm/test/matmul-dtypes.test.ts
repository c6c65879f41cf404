import { type Backend, type FloatDType, decodeElements, encodeToBytes } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";
import { randomArray, referenceMatmul } from "./reference-matmul.js";
import { nativeMatmulOnly, nativeSkipReason } from "./support/native.js";

interface Shape {
  name: string;
  m: number;
  n: number;
  k: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  strideA?: number;
  strideB?: number;
  strideC?: number;
  alpha?: number;
  accumulate?: boolean;
  bias?: boolean;
}

// Shapes that reach every path of the 16-bit kernels: the matrix-vector ones,
// edge tiles, several k blocks (partial sums kept in f32), more rows than one
// row block, more columns than one B panel, batches and strides.
const shapes: Shape[] = [
  { name: "1x1x1", m: 1, n: 1, k: 1 },
  { name: "one row 1x100x300 bias accumulate alpha", m: 1, n: 100, k: 300, bias: true, accumulate: true, alpha: 0.5 },
  { name: "one row transB 1x50x33 bias", m: 1, n: 50, k: 33, transB: true, bias: true },
  { name: "one column transA 70x1x40 bias accumulate batch 3", m: 70, n: 1, k: 40, transA: true, bias: true, accumulate: true, batch: 3 },
  { name: "one column transB 29x1x300 bias alpha", m: 29, n: 1, k: 300, transB: true, bias: true, alpha: -2 },
  { name: "edge tiles 13x7x37", m: 13, n: 7, k: 37 },
  { name: "edge tiles transA 13x7x37", m: 13, n: 7, k: 37, transA: true },
  { name: "edge tiles transB 13x7x37", m: 13, n: 7, k: 37, transB: true },
  { name: "whole tiles 12x24x8", m: 12, n: 24, k: 8 },
  { name: "k blocks 37x29x700 accumulate bias", m: 37, n: 29, k: 700, accumulate: true, bias: true },
  { name: "k blocks transA transB 29x31x523 accumulate bias alpha", m: 29, n: 31, k: 523, transA: true, transB: true, accumulate: true, bias: true, alpha: 0.75 },
  { name: "row blocks 211x13x300 transA", m: 211, n: 13, k: 300, transA: true, accumulate: true },
  { name: "column panels 3x2053x260 transB bias", m: 3, n: 2053, k: 260, transB: true, bias: true },
  { name: "dot product past the vector scratch 1x1x524300", m: 1, n: 1, k: 524_300 },
  { name: "batch 4 broadcast A 9x5x17", m: 9, n: 5, k: 17, batch: 4, strideA: 0, transA: true, transB: true },
  { name: "batch 2 padded strides 3x5x4", m: 3, n: 5, k: 4, batch: 2, strideA: 15, strideB: 23, strideC: 19, accumulate: true },
];

/** Distance between adjacent values of `dtype` at magnitude x. */
function ulp(dtype: FloatDType, x: number): number {
  const e = Math.floor(Math.log2(Math.max(x, 2 ** -126)));
  if (dtype === "f32") return 2 ** (e - 23);
  return dtype === "bf16" ? 2 ** (e - 7) : 2 ** (Math.max(e, -14) - 10);
}

/** Values as stored in `dtype` (rounded), read back as f32. */
function rounded(values: Float32Array, dtype: FloatDType): Float32Array {
  return Float32Array.from(decodeElements(encodeToBytes(values, dtype), dtype, values.length));
}

function upload(backend: Backend, values: Float32Array, dtype: FloatDType) {
  const bytes = encodeToBytes(values, dtype);
  const buffer = backend.alloc(bytes.byteLength);
  backend.upload(buffer, bytes);
  return buffer;
}

/** One matmul with A, B and bias in `dtype` and C in `cDtype` (`dtype`, or f32: gradients kept in f32). */
async function run(backend: Backend, dtype: FloatDType, cDtype: FloatDType, s: Shape, seed: number) {
  const batch = s.batch ?? 1;
  const sa = s.strideA ?? s.m * s.k;
  const sb = s.strideB ?? s.k * s.n;
  const sc = s.strideC ?? s.m * s.n;
  const a = rounded(randomArray((batch - 1) * sa + s.m * s.k, seed), dtype);
  const b = rounded(randomArray((batch - 1) * sb + s.k * s.n, seed + 1), dtype);
  const c = rounded(randomArray((batch - 1) * sc + s.m * s.n, seed + 2), cDtype);
  const bias = s.bias ? rounded(randomArray(s.n, seed + 3), dtype) : undefined;
  const expected = referenceMatmul(a, b, { ...s, bias, out: s.accumulate ? c : undefined });
  const buffers = { a: upload(backend, a, dtype), b: upload(backend, b, dtype), c: upload(backend, c, cDtype), ...(bias ? { bias: upload(backend, bias, dtype) } : {}) };
  try {
    const { name: _name, bias: _bias, ...shape } = s;
    backend.kernels.matmul({ ...buffers, ...shape, dtype, ...(cDtype !== dtype ? { cDtype } : {}) });
    const out = new Uint8Array(encodeToBytes(c, cDtype).byteLength);
    await backend.download(buffers.c, out);
    return { got: decodeElements(out, cDtype, c.length), expected, before: c };
  } finally {
    for (const buf of Object.values(buffers)) backend.free(buf);
  }
}

// The plain build has its own register tile (4x8 instead of 3x12); the native kernels
// (where this machine built them) their own again.
const setups: { threads: number; simd: "auto" | "plain"; native: boolean }[] = [
  { threads: 1, simd: "auto", native: false },
  { threads: 2, simd: "auto", native: false },
  { threads: 2, simd: "plain", native: false },
  ...(nativeSkipReason() === undefined ? [{ threads: 2, simd: "auto" as const, native: true }] : []),
];

for (const { threads, simd, native } of setups) {
  describe(`matmul in bf16 and f16 on ${threads} thread${threads > 1 ? "s" : ""}${simd === "plain" ? ", plain SIMD" : ""}${native ? ", native" : ""}`, () => {
    let backend: Backend;
    beforeAll(async () => {
      const made = await createWasmBackend({ threads, simd, native, minFlopsPerThread: 0, measurePeak: false });
      backend = native ? nativeMatmulOnly(made) : made;
    });
    afterAll(() => backend.dispose());

    for (const [dtype, cDtype] of [["bf16", "bf16"], ["f16", "f16"], ["bf16", "f32"], ["f16", "f32"]] as const) {
      const label = cDtype === dtype ? dtype : `${dtype} cDtype=${cDtype}`;
      shapes.forEach((s, i) => {
        it(`${label} ${s.name}`, async () => {
          const { got, expected, before } = await run(backend, dtype, cDtype, s, 100 * i + threads);
          const sc = s.strideC ?? s.m * s.n;
          let worst = 0;
          for (let bi = 0; bi < (s.batch ?? 1); bi++) {
            for (let e = 0; e < s.m * s.n; e++) {
              const at = bi * sc + e;
              // f32 sums, then one rounding to C's dtype.
              const sumError = (s.k + 4) * 2 ** -23 * expected.magnitude[at];
              const tol = sumError + ulp(cDtype, Math.abs(expected.c[at]) + sumError);
              worst = Math.max(worst, Math.abs(got[at] - expected.c[at]) / tol);
            }
            // Padding between batch items is left alone.
            for (let e = bi * sc + s.m * s.n; e < Math.min((bi + 1) * sc, before.length); e++) expect(got[e]).toBe(before[e]);
          }
          expect(worst).toBeLessThanOrEqual(1);
        });
      });

      if (cDtype !== dtype) continue;
      it(`${dtype} rounds C once when k spans several blocks`, async () => {
        // A is all ones; column 0 of B holds 1000 and 0.25 among its first 256 values (one k block)
        // and -1000 after them, so C[0,0] = 0.25. Rounding the first block's partial sum (1000.25)
        // to bf16 or f16 would give 1000, and C[0,0] = 0.
        const m = 2, n = 3, k = 600;
        const a = new Float32Array(m * k).fill(1);
        const b = new Float32Array(k * n);
        b[0] = 1000;
        b[n] = 0.25;
        b[300 * n] = -1000;
        const buffers = { a: upload(backend, a, dtype), b: upload(backend, b, dtype), c: upload(backend, new Float32Array(m * n), dtype) };
        try {
          backend.kernels.matmul({ ...buffers, m, n, k, dtype });
          const out = new Uint8Array(2 * m * n);
          await backend.download(buffers.c, out);
          const c = decodeElements(out, dtype, m * n);
          expect(c[0]).toBe(0.25);
        } finally {
          for (const buf of Object.values(buffers)) backend.free(buf);
        }
      });
    }
  });
}
