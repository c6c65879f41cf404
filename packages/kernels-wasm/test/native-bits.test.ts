import { type Backend, type FloatDType, encodeToBytes } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";
import { randomArray } from "./reference-matmul.js";
import { nativeIsas, nativeKernelsOnly, nativeSkipReason, withEnv } from "./support/native.js";

// The bits of the native kernels that share work among threads: attention's out, lse, dQ,
// dK and dV, and the norm backward's dX, dWeight, dBias and dX's column sums, the same on
// every call and on 1, 2 and 3 threads (work units drawn from a counter by whichever thread
// runs), on every instruction set this CPU has. Their values against the oracle are the
// conformance suite's.

interface Shape {
  name: string;
  batch: number;
  seqLen: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vHeadDim?: number;
  window?: number;
  scale?: number;
}

const shapes: Shape[] = [
  { name: "gpt-2 like", batch: 3, seqLen: 130, heads: 4, kvHeads: 4, headDim: 64 },
  { name: "gqa, odd sizes", batch: 2, seqLen: 53, heads: 6, kvHeads: 2, headDim: 20, vHeadDim: 36 },
  { name: "sliding window", batch: 2, seqLen: 200, heads: 2, kvHeads: 1, headDim: 32, window: 37, scale: 0.5 },
];

function upload(backend: Backend, values: Float32Array, dtype: FloatDType) {
  const bytes = encodeToBytes(values, dtype);
  const buffer = backend.alloc(bytes.byteLength);
  backend.upload(buffer, bytes);
  return buffer;
}

/** Every output of one forward and one backward of seeded operands, as bytes, in one array. */
async function attentionBytes(backend: Backend, s: Shape, dtype: FloatDType): Promise<Uint8Array> {
  const { name: _name, ...dims } = s;
  const dv = s.vHeadDim ?? s.headDim, rows = s.batch * s.seqLen;
  const sizes = { q: rows * s.heads * s.headDim, k: rows * s.kvHeads * s.headDim, v: rows * s.kvHeads * dv, out: rows * s.heads * dv };
  const eb = dtype === "f32" ? 4 : 2;
  const lseBytes = 4 * s.batch * s.heads * s.seqLen;
  const b = {
    q: upload(backend, randomArray(sizes.q, 11), dtype),
    k: upload(backend, randomArray(sizes.k, 12), dtype),
    v: upload(backend, randomArray(sizes.v, 13), dtype),
    dOut: upload(backend, randomArray(sizes.out, 14), dtype),
    out: backend.alloc(sizes.out * eb),
    lse: backend.alloc(lseBytes),
    dQ: backend.alloc(sizes.q * eb),
    dK: backend.alloc(sizes.k * eb),
    dV: backend.alloc(sizes.v * eb),
  };
  try {
    backend.kernels.attentionForward({ q: b.q, k: b.k, v: b.v, out: b.out, lse: b.lse, ...dims, dtype });
    backend.kernels.attentionBackward({ ...b, ...dims, dtype });
    const parts = [
      [b.out, sizes.out * eb],
      [b.lse, lseBytes],
      [b.dQ, sizes.q * eb],
      [b.dK, sizes.k * eb],
      [b.dV, sizes.v * eb],
    ] as const;
    const all = new Uint8Array(parts.reduce((n, [, bytes]) => n + bytes, 0));
    let at = 0;
    for (const [buffer, bytes] of parts) {
      await backend.download(buffer, all.subarray(at, at + bytes));
      at += bytes;
    }
    return all;
  } finally {
    for (const buffer of Object.values(b)) backend.free(buffer);
  }
}

/** dX, dWeight, dBias and dX's column sums of one layerNorm backward (f32 parameter gradients) over `rows` seeded rows. */
async function normBytes(backend: Backend, rows: number, dim: number, dtype: FloatDType): Promise<Uint8Array> {
  const eb = dtype === "f32" ? 4 : 2;
  const rstd = randomArray(rows, 25).map((v) => 1 + Math.abs(v));
  const b = {
    dOut: upload(backend, randomArray(rows * dim, 21), dtype),
    x: upload(backend, randomArray(rows * dim, 22), dtype),
    weight: upload(backend, randomArray(dim, 23), dtype),
    mean: upload(backend, randomArray(rows, 24), "f32"),
    rstd: upload(backend, rstd, "f32"),
    dX: backend.alloc(rows * dim * eb),
    dWeight: upload(backend, new Float32Array(dim).fill(0.25), "f32"),
    dBias: upload(backend, new Float32Array(dim).fill(-0.5), "f32"),
    dXColSums: upload(backend, new Float32Array(dim), "f32"),
  };
  try {
    backend.kernels.layerNormBackward({ ...b, rows, dim, dtype, ...(dtype === "f32" ? {} : { gradDtype: "f32" as const }) });
    const parts = [
      [b.dX, rows * dim * eb],
      [b.dWeight, dim * 4],
      [b.dBias, dim * 4],
      [b.dXColSums, dim * 4],
    ] as const;
    const all = new Uint8Array(parts.reduce((n, [, bytes]) => n + bytes, 0));
    let at = 0;
    for (const [buffer, bytes] of parts) {
      await backend.download(buffer, all.subarray(at, at + bytes));
      at += bytes;
    }
    return all;
  } finally {
    for (const buffer of Object.values(b)) backend.free(buffer);
  }
}

const sameBits = (got: Uint8Array, want: Uint8Array) => got.length === want.length && got.every((x, i) => x === want[i]);

const skip = nativeSkipReason();

describe.skipIf(skip !== undefined)(`native attention and norm bits${skip ? ` (skipped: ${skip})` : ""}`, () => {
  for (const isa of nativeIsas()) {
    describe(isa, () => {
      const threadCounts = [1, 2, 3] as const;
      const native: Record<number, Backend> = {};
      beforeAll(async () => {
        for (const threads of threadCounts) {
          native[threads] = nativeKernelsOnly(await withEnv({ KILN_NATIVE_ISA: isa }, () => createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false })));
        }
      });
      afterAll(() => {
        for (const b of Object.values(native)) b.dispose();
      });

      for (const dtype of ["f32", "bf16", "f16"] as const) {
        for (const s of shapes) {
          it(`attention ${dtype} ${s.name}: the same bits on 1, 2 and 3 threads, twice`, async () => {
            const first = await attentionBytes(native[1], s, dtype);
            expect(sameBits(await attentionBytes(native[1], s, dtype), first), "a second call").toBe(true);
            for (const threads of [2, 3]) expect(sameBits(await attentionBytes(native[threads], s, dtype), first), `${threads} threads`).toBe(true);
          });
        }
        for (const [rows, dim] of [[7, 13], [301, 200]] as const) {
          it(`layerNormBackward ${dtype} ${rows} x ${dim}: the same bits on 1, 2 and 3 threads, twice`, async () => {
            const first = await normBytes(native[1], rows, dim, dtype);
            expect(sameBits(await normBytes(native[1], rows, dim, dtype), first), "a second call").toBe(true);
            for (const threads of [2, 3]) expect(sameBits(await normBytes(native[threads], rows, dim, dtype), first), `${threads} threads`).toBe(true);
          });
        }
      }
    });
  }
});
