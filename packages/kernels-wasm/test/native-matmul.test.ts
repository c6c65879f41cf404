import { type Backend, type FloatDType, type MatmulArgs, encodeToBytes } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";
import { randomArray } from "./reference-matmul.js";
import { nativeIsas, nativeMatmulOnly, nativeSkipReason, withEnv } from "./support/native.js";

// The native matmul's bits: the same on every call and every thread count, and the same as
// the WebAssembly kernel's relaxed (fused multiply-add) build, whose summation order it
// follows (k blocks of 256, one FMA chain per element and block; the matrix-vector sums).

interface Shape {
  name: string;
  m: number;
  n: number;
  k: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  lda?: number;
  strideA?: number;
  strideB?: number;
  strideC?: number;
  alpha?: number;
  accumulate?: boolean;
  bias?: boolean;
}

// Every path: matrix-vector (one row, one column, each layout), edge tiles, several k
// blocks, more rows than a row block (A block and 16-bit Cp), more columns than a B panel,
// batches (whole items per thread, and split items), broadcasts, padded strides, lda.
const shapes: Shape[] = [
  { name: "1x1x1", m: 1, n: 1, k: 1 },
  { name: "one row 1x100x300 bias accumulate alpha", m: 1, n: 100, k: 300, bias: true, accumulate: true, alpha: 0.5 },
  { name: "one row transB 1x50x333 bias", m: 1, n: 50, k: 333, transB: true, bias: true },
  { name: "one column transA 70x1x40 bias accumulate batch 3", m: 70, n: 1, k: 40, transA: true, bias: true, accumulate: true, batch: 3 },
  { name: "one column 29x1x301 bias alpha lda", m: 29, n: 1, k: 301, lda: 310, bias: true, alpha: -2 },
  { name: "edge tiles 13x7x37", m: 13, n: 7, k: 37 },
  { name: "edge tiles transA transB 13x35x37", m: 13, n: 35, k: 37, transA: true, transB: true },
  { name: "k blocks 37x29x700 accumulate bias", m: 37, n: 29, k: 700, accumulate: true, bias: true },
  { name: "k blocks transA transB 29x31x523 accumulate bias alpha", m: 29, n: 31, k: 523, transA: true, transB: true, accumulate: true, bias: true, alpha: 0.75 },
  { name: "row blocks 311x45x520 transA lda", m: 311, n: 45, k: 520, transA: true, lda: 320, accumulate: true },
  { name: "column panels 7x2100x260 transB bias", m: 7, n: 2100, k: 260, transB: true, bias: true },
  { name: "square 96x160x384", m: 96, n: 160, k: 384 },
  { name: "batch 6 (items per thread) 20x24x30 transB", m: 20, n: 24, k: 30, batch: 6, transB: true },
  { name: "batch 3 broadcast B 17x40x300 accumulate", m: 17, n: 40, k: 300, batch: 3, strideB: 0, accumulate: true },
  { name: "batch 2 padded strides 3x5x4", m: 3, n: 5, k: 4, batch: 2, strideA: 15, strideB: 23, strideC: 19, accumulate: true },
];

const DTYPES: readonly (readonly [FloatDType, FloatDType])[] = [["f32", "f32"], ["bf16", "bf16"], ["f16", "f16"], ["bf16", "f32"], ["f16", "f32"]];

function upload(backend: Backend, values: Float32Array, dtype: FloatDType) {
  const bytes = encodeToBytes(values, dtype);
  const buffer = backend.alloc(bytes.byteLength);
  backend.upload(buffer, bytes);
  return buffer;
}

/** C's bytes after one matmul of seeded operands (C's starting values seeded too). */
async function product(backend: Backend, s: Shape, dtype: FloatDType, cDtype: FloatDType): Promise<Uint8Array> {
  const batch = s.batch ?? 1;
  const aRows = s.transA ? s.k : s.m, aCols = s.transA ? s.m : s.k, lda = s.lda ?? aCols;
  const sa = s.strideA ?? aRows * lda, sb = s.strideB ?? s.k * s.n, sc = s.strideC ?? s.m * s.n;
  const a = randomArray((batch - 1) * sa + aRows * lda, 1);
  const b = randomArray((batch - 1) * sb + s.k * s.n, 2);
  const c0 = randomArray((batch - 1) * sc + s.m * s.n, 3);
  const buffers = {
    a: upload(backend, a, dtype),
    b: upload(backend, b, dtype),
    c: upload(backend, c0, cDtype),
    ...(s.bias ? { bias: upload(backend, randomArray(s.n, 4), dtype) } : {}),
  };
  try {
    const { name: _name, bias: _bias, ...dims } = s;
    backend.kernels.matmul({ ...buffers, ...dims, dtype, ...(cDtype !== dtype ? { cDtype } : {}) } as MatmulArgs);
    const out = new Uint8Array(encodeToBytes(c0, cDtype).byteLength);
    await backend.download(buffers.c, out);
    return out;
  } finally {
    for (const buf of Object.values(buffers)) backend.free(buf);
  }
}

/** Where two byte arrays first differ, as a message; undefined when equal. */
function firstDifference(got: Uint8Array, want: Uint8Array): string | undefined {
  if (got.length !== want.length) return `${got.length} bytes instead of ${want.length}`;
  const i = got.findIndex((x, j) => x !== want[j]);
  return i < 0 ? undefined : `byte ${i} is ${got[i]}, not ${want[i]}`;
}

const skip = nativeSkipReason();

describe.skipIf(skip !== undefined)(`native matmul bits${skip ? ` (skipped: ${skip})` : ""}`, () => {
  for (const isa of nativeIsas()) {
    describe(isa, () => {
      const threadCounts = [1, 2, 3] as const;
      const native: Record<number, Backend> = {};
      let wasm: Backend;
      beforeAll(async () => {
        for (const threads of threadCounts) {
          native[threads] = nativeMatmulOnly(await withEnv({ KILN_NATIVE_ISA: isa }, () => createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false })));
        }
        wasm = await createWasmBackend({ threads: 1, simd: "auto", native: false, measurePeak: false });
      });
      afterAll(() => {
        for (const b of Object.values(native)) b.dispose();
        wasm?.dispose();
      });

      for (const [dtype, cDtype] of DTYPES) {
        const label = cDtype === dtype ? dtype : `${dtype} cDtype=${cDtype}`;
        for (const s of shapes) {
          it(`${label} ${s.name}: the same bits on 1, 2 and 3 threads, twice, and as the wasm kernel`, async () => {
            const first = await product(native[1], s, dtype, cDtype);
            expect(firstDifference(await product(native[1], s, dtype, cDtype), first), "a second call").toBeUndefined();
            for (const threads of [2, 3]) expect(firstDifference(await product(native[threads], s, dtype, cDtype), first), `${threads} threads`).toBeUndefined();
            const relaxed = wasm.capabilities().device.simd === "relaxed-simd";
            if (relaxed) expect(firstDifference(first, await product(wasm, s, dtype, cDtype)), "the relaxed wasm kernel").toBeUndefined();
          });
        }
      }
    });
  }
});
