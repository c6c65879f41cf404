import {
  type AttentionDims,
  type Backend,
  type FloatDType,
  KernelArgumentError,
  attentionLayout,
  decodeElements,
  encodeToBytes,
  oracle,
} from "@kiln/contract";
import { type ConformanceCase, TOLERANCES, checkCase, compareValues, seededRandom } from "@kiln/contract/conformance";
import { createReferenceBackend } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

const DTYPES: FloatDType[] = ["f32", "bf16", "f16"];
const BYTES: Record<FloatDType, number> = { f32: 4, bf16: 2, f16: 2 };

/** Values rounded to `dtype` and back, as the kernels see them. */
function rounded(values: Float64Array, dtype: FloatDType): Float64Array {
  return decodeElements(encodeToBytes(values, dtype), dtype, values.length);
}

function randomValues(n: number, seed: number): Float64Array {
  const rand = seededRandom(seed);
  return Float64Array.from({ length: n }, () => 2 * rand() - 1);
}

async function download(backend: Backend, buffer: ReturnType<Backend["alloc"]>, dtype: FloatDType | "f32", n: number) {
  const bytes = new Uint8Array(n * BYTES[dtype]);
  await backend.download(buffer, bytes);
  return decodeElements(bytes, dtype, n);
}

function expectClose(what: string, actual: Float64Array, expected: Float64Array, dtype: FloatDType): void {
  const { count, mismatches } = compareValues(actual, expected, TOLERANCES[dtype]);
  expect(count, `${what}: ${JSON.stringify(mismatches)}`).toBe(0);
}

/**
 * q, k, v as three slices of one (B*T, stride) buffer and dQ, dK, dV as three
 * slices of another, each row ending in `gap` columns no kernel may touch.
 */
async function packedRoundTrip(backend: Backend, dtype: FloatDType, dims: Omit<AttentionDims, "dtype">, gap: number) {
  const { batch: B, seqLen: T, heads: H, kvHeads: KH, headDim: D } = dims;
  const rows = B * T;
  const stride = (H + 2 * KH) * D + gap;
  const offsets = { q: 0, k: H * D, v: (H + KH) * D };
  const args = { ...dims, dtype, qRowStride: stride, kvRowStride: stride };
  const l = attentionLayout(args);
  const esize = BYTES[dtype];

  const qkv = rounded(randomValues(rows * stride, 1 + T + D), dtype);
  const dOut = rounded(randomValues(rows * H * D, 2 + T + D), dtype);
  const sentinel = 3.5;
  const grads = new Float64Array(rows * stride).fill(sentinel);

  // Oracle on the same packed layout: operands are views at the slices' offsets.
  const at = (a: Float64Array, offset: number) => a.subarray(offset);
  const want = { out: new Float64Array(rows * H * D), lse: new Float64Array(B * H * T) };
  oracle.attentionForward(args as never, { q: at(qkv, offsets.q), k: at(qkv, offsets.k), v: at(qkv, offsets.v), ...want });
  const outStored = rounded(want.out, dtype);
  const lseStored = rounded(want.lse, "f32");
  const wantGrads = grads.slice();
  oracle.attentionBackward(args as never, {
    dOut, out: outStored, lse: lseStored,
    q: at(qkv, offsets.q), k: at(qkv, offsets.k), v: at(qkv, offsets.v),
    dQ: at(wantGrads, offsets.q), dK: at(wantGrads, offsets.k), dV: at(wantGrads, offsets.v),
  });

  const qkvBuf = backend.alloc(qkv.length * esize);
  const gradBuf = backend.alloc(grads.length * esize);
  const outBuf = backend.alloc(rows * H * D * esize);
  const lseBuf = backend.alloc(B * H * T * 4);
  const dOutBuf = backend.alloc(dOut.length * esize);
  try {
    backend.upload(qkvBuf, encodeToBytes(qkv, dtype));
    backend.upload(gradBuf, encodeToBytes(grads, dtype));
    backend.upload(dOutBuf, encodeToBytes(dOut, dtype));
    const slice = (buffer: typeof qkvBuf, offset: number) => ({ buffer, byteOffset: offset * esize });
    const q = slice(qkvBuf, offsets.q), k = slice(qkvBuf, offsets.k), v = slice(qkvBuf, offsets.v);
    backend.kernels.attentionForward({ ...args, q, k, v, out: outBuf, lse: lseBuf });
    expectClose("out", await download(backend, outBuf, dtype, want.out.length), outStored, dtype);
    expectClose("lse", await download(backend, lseBuf, "f32", want.lse.length), lseStored, "f32");

    // The backward reads the oracle's saved out and lse, so it is checked on its own.
    backend.upload(outBuf, encodeToBytes(outStored, dtype));
    backend.upload(lseBuf, encodeToBytes(lseStored, "f32"));
    backend.kernels.attentionBackward({
      ...args, q, k, v, out: outBuf, lse: lseBuf, dOut: dOutBuf,
      dQ: slice(gradBuf, offsets.q), dK: slice(gradBuf, offsets.k), dV: slice(gradBuf, offsets.v),
    });
    const got = await download(backend, gradBuf, dtype, grads.length);
    expectClose("packed dQ/dK/dV", got, rounded(wantGrads, dtype), dtype);
    for (let r = 0; r < rows; r++) {
      for (let c = stride - gap; c < stride; c++) expect(got[r * stride + c], `gap at row ${r}`).toBe(sentinel);
    }
    expect(l.group).toBe(H / KH);
  } finally {
    for (const b of [qkvBuf, gradBuf, outBuf, lseBuf, dOutBuf]) backend.free(b);
  }
}

/** A conformance-style case; the backward's out and lse come from the oracle's forward. */
function attentionCase(kernel: "attentionForward" | "attentionBackward", dtype: FloatDType, args: Record<string, unknown>): ConformanceCase {
  const label = Object.entries(args).map(([k, v]) => `${k}=${v}`).join(" ");
  return {
    kernel, dtype, shape: "large", label, args: { ...args, dtype },
    ...(kernel === "attentionBackward"
      ? { derive: (a: Record<string, unknown>, v: Record<string, Float64Array>) => oracle.attentionForward(a as never, v) }
      : {}),
  };
}

const SHAPES = [
  { batch: 2, seqLen: 100, heads: 6, kvHeads: 6, headDim: 64 },
  { batch: 1, seqLen: 50, heads: 2, kvHeads: 1, headDim: 128 },
  { batch: 3, seqLen: 97, heads: 6, kvHeads: 2, headDim: 5 },
  { batch: 1, seqLen: 200, heads: 1, kvHeads: 1, headDim: 12, scale: -0.2 },
];

for (const threads of [1, 2]) {
  describe(`attention, ${threads} thread${threads > 1 ? "s" : ""}`, () => {
    let backend: Backend;
    const reference = createReferenceBackend();
    beforeAll(async () => {
      backend = await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false });
    });
    afterAll(() => {
      backend.dispose();
      reference.dispose();
    });

    for (const dtype of DTYPES) {
      it(`${dtype}: dQ, dK, dV as three slices of one packed buffer (GPT-2 qkv)`, async () => {
        await packedRoundTrip(backend, dtype, { batch: 2, seqLen: 61, heads: 3, kvHeads: 3, headDim: 8 }, 3);
      });
      it(`${dtype}: packed q/k/v and gradients with grouped kv heads`, async () => {
        await packedRoundTrip(backend, dtype, { batch: 1, seqLen: 53, heads: 4, kvHeads: 2, headDim: 6 }, 1);
      });
      for (const shape of SHAPES) {
        for (const kernel of ["attentionForward", "attentionBackward"] as const) {
          const c = attentionCase(kernel, dtype, shape);
          it(`${kernel} ${dtype} ${c.label}`, async () => {
            expect(await checkCase(backend, reference, c)).toEqual([]);
          });
        }
      }
    }

    it("rejects an output that overlaps an input", () => {
      const dims = { batch: 1, seqLen: 4, heads: 1, kvHeads: 1, headDim: 4, dtype: "f32" as const };
      const buf = backend.alloc(16 * 4 * 4);
      const lse = backend.alloc(16);
      try {
        const s = (i: number) => ({ buffer: buf, byteOffset: i * 64 });
        expect(() => backend.kernels.attentionForward({ ...dims, q: s(0), k: s(1), v: s(2), out: s(0), lse })).toThrow(KernelArgumentError);
      } finally {
        backend.free(buf);
        backend.free(lse);
      }
    });
  });
}

describe("attention determinism", () => {
  it("gives the same bits on 1 and 2 threads", async () => {
    const c = attentionCase("attentionBackward", "f32", { batch: 2, seqLen: 77, heads: 4, kvHeads: 2, headDim: 16 });
    const outputs: Float64Array[][] = [];
    for (const threads of [1, 2]) {
      const backend = await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false });
      const dims = c.args as unknown as AttentionDims;
      const n = dims.batch * dims.seqLen * dims.heads * dims.headDim;
      const nkv = dims.batch * dims.seqLen * dims.kvHeads * dims.headDim;
      const bufs = Object.fromEntries(
        Object.entries({ q: n, k: nkv, v: nkv, out: n, dOut: n, dQ: n, dK: nkv, dV: nkv, lse: dims.batch * dims.heads * dims.seqLen }).map(
          ([key, len], i) => {
            const b = backend.alloc(len * 4);
            backend.upload(b, new Float32Array(randomValues(len, 100 + i)));
            return [key, b];
          },
        ),
      );
      backend.kernels.attentionForward({ ...dims, q: bufs.q, k: bufs.k, v: bufs.v, out: bufs.out, lse: bufs.lse });
      backend.kernels.attentionBackward({ ...dims, ...bufs } as never);
      const result: Float64Array[] = [];
      for (const key of ["out", "lse", "dQ", "dK", "dV"]) {
        const len = key === "lse" ? dims.batch * dims.heads * dims.seqLen : key === "dK" || key === "dV" ? nkv : n;
        result.push(await download(backend, bufs[key], "f32", len));
      }
      outputs.push(result);
      backend.dispose();
    }
    for (let i = 0; i < outputs[0].length; i++) expect(outputs[1][i]).toEqual(outputs[0][i]);
  });
});
