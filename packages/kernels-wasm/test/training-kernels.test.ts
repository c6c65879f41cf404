import { type Backend, type BufferHandle, KernelArgumentError, f32ToBf16, f32ToF16, sliceOperand } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";
import { BackendBuffers } from "./support/backend-buffers.js";

/** A small seeded generator (LCG) for test data. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** f32 bit patterns as signed integers: their difference counts ulps for same-signed values. */
function f32Bits(x: number): number {
  return new Int32Array(new Float32Array([x]).buffer)[0];
}

describe("loss, reduction and conversion kernels beyond the conformance shapes", () => {
  let backend: Backend;
  const buffers = new BackendBuffers(() => backend);
  const upload = (data: ArrayBufferView) => buffers.upload(data);
  const empty = (bytes: number) => buffers.empty(bytes);
  const download = async <T extends Float32Array | Int32Array | Uint16Array | Uint32Array>(b: BufferHandle, out: T) => {
    await backend.download(b, out);
    return out;
  };

  beforeAll(async () => {
    backend = await createWasmBackend({ threads: 2, minFlopsPerThread: 0, measurePeak: false });
  });
  afterAll(() => {
    buffers.freeAll();
    backend.dispose();
  });

  it("computes exp within 1 ulp of f32 over its whole range (crossEntropyBackward with lse 0)", async () => {
    const n = 1 << 18;
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = -87 + (175 * i) / n;
    const dLogits = empty(4 * n);
    backend.kernels.crossEntropyBackward({
      logits: upload(x), targets: upload(new Int32Array([0])), lse: upload(new Float32Array([0])), dLogits, rows: 1, vocab: n, lossScale: 1, dtype: "f32",
    });
    const d = await download(dLogits, new Float32Array(n));
    let worst = 0;
    for (let i = 1; i < n; i++) worst = Math.max(worst, Math.abs(f32Bits(d[i]) - f32Bits(Math.exp(x[i]))));
    expect(worst).toBeLessThanOrEqual(1);
    expect(d[0]).toBeCloseTo(Math.exp(x[0]) - 1, 6);
  });

  it("takes exp below f32's normal range to subnormals, then 0 (crossEntropyBackward with lse 0)", async () => {
    const x = Float32Array.from({ length: 4096 }, (_, i) => -87 - (20 * i) / 4095);
    x[0] = 0; // the target's element: exp(0) - 1
    x[1] = -Infinity;
    const n = x.length;
    const dLogits = empty(4 * n);
    backend.kernels.crossEntropyBackward({
      logits: upload(x), targets: upload(new Int32Array([0])), lse: upload(new Float32Array([0])), dLogits, rows: 1, vocab: n, lossScale: 1, dtype: "f32",
    });
    const d = await download(dLogits, new Float32Array(n));
    expect(d[0]).toBe(0);
    expect(d[1]).toBe(0);
    let subnormals = 0;
    for (let i = 2; i < n; i++) {
      if (x[i] <= -87.7) expect(d[i], `exp(${x[i]})`).toBe(0);
      else if (x[i] >= -87.66) {
        expect(Math.abs(d[i] - Math.exp(x[i])), `exp(${x[i]})`).toBeLessThanOrEqual(2 ** -148);
        if (d[i] < 2 ** -126) subnormals++;
      }
    }
    expect(subnormals).toBeGreaterThan(50);
  });

  it("gets lse and losses of GPT-2-sized rows (vocab 50257) to f32 rounding", async () => {
    const rows = 3, vocab = 50257;
    const rand = lcg(7);
    const logits = new Float32Array(rows * vocab).map(() => (rand() - 0.5) * 40);
    const targets = new Int32Array([5, vocab - 1, -1]);
    const losses = empty(4 * rows), lse = empty(4 * rows);
    backend.kernels.crossEntropyForward({ logits: upload(logits), targets: upload(targets), losses, lse, rows, vocab, dtype: "f32" });
    const gotLse = await download(lse, new Float32Array(rows));
    const gotLoss = await download(losses, new Float32Array(rows));
    for (let r = 0; r < rows; r++) {
      const row = logits.subarray(r * vocab, (r + 1) * vocab);
      const max = row.reduce((a, b) => Math.max(a, b), -Infinity);
      const want = max + Math.log(row.reduce((s, v) => s + Math.exp(v - max), 0));
      expect(Math.abs(gotLse[r] - want)).toBeLessThan(4e-6 * Math.abs(want));
      expect(gotLoss[r]).toBeCloseTo(targets[r] < 0 ? 0 : want - row[targets[r]], 4);
    }
  });

  it("rejects targets outside the vocabulary like the reference", () => {
    const logits = upload(new Float32Array(8));
    const args = { logits, targets: upload(new Int32Array([1, 4])), losses: empty(8), lse: empty(8), rows: 2, vocab: 4, dtype: "f32" as const };
    expect(() => backend.kernels.crossEntropyForward(args)).toThrow(KernelArgumentError);
    expect(() => backend.kernels.crossEntropyForward({ ...args, losses: sliceOperand(logits, 4) })).toThrow(/overlaps/);
  });

  it("sums deterministically, in f64 across blocks, and accumulates", async () => {
    // A plain running f32 sum of a million 0.1s drifts by about 1%; blocked sums stay at f32 rounding.
    const n = 1_000_003;
    const tenth = Math.fround(0.1);
    const xb = upload(new Float32Array(n).fill(tenth));
    const out = upload(new Float32Array([0.5]));
    backend.kernels.sum({ x: xb, out, n, dtype: "f32" });
    const first = (await download(out, new Float32Array(1)))[0];
    expect(Math.abs(first - n * tenth)).toBeLessThan(1e-6 * n * tenth);
    for (let i = 0; i < 3; i++) backend.kernels.sum({ x: xb, out, n, dtype: "f32" });
    expect((await download(out, new Float32Array(1)))[0]).toBe(first);
    backend.kernels.sumSquares({ x: upload(new Float32Array([3, 4])), out, n: 2, accumulate: true, dtype: "f32" });
    expect((await download(out, new Float32Array(1)))[0]).toBe(Math.fround(first + 25));
  });

  it("sets the finiteness flag for a NaN or infinity anywhere, and otherwise leaves it alone", async () => {
    const encoders = { f32: (v: number) => v, bf16: f32ToBf16, f16: f32ToF16 };
    for (const dtype of ["f32", "bf16", "f16"] as const) {
      for (const n of [1, 3, 31, 64, 77]) {
        for (const bad of [NaN, Infinity, -Infinity, undefined]) {
          for (const at of bad === undefined ? [0] : [0, n - 1, n >> 1]) {
            const values = Array.from({ length: n }, (_, i) => (i === at && bad !== undefined ? bad : 65504 * (i % 2 ? -1 : 1)));
            const data = dtype === "f32" ? new Float32Array(values) : new Uint16Array(values.map(encoders[dtype]));
            const flag = upload(new Int32Array([7]));
            backend.kernels.checkFinite({ x: upload(data), flag, n, dtype });
            expect((await download(flag, new Int32Array(1)))[0], `${dtype} n=${n} ${bad} at ${at}`).toBe(bad === undefined ? 7 : 1);
          }
        }
      }
    }
  });

  it("takes operands at any byte offset", async () => {
    const n = 37;
    const bytes = new Uint8Array(4 * n + 3);
    const x = new Float32Array(n).map((_, i) => i - 18);
    bytes.set(new Uint8Array(x.buffer), 1);
    const xb = upload(bytes);
    const outb = upload(new Uint8Array(8));
    backend.kernels.sumSquares({ x: sliceOperand(xb, 1), out: sliceOperand(outb, 2), n, dtype: "f32" });
    backend.kernels.add({ a: sliceOperand(xb, 1), b: sliceOperand(xb, 1), out: sliceOperand(xb, 1), n, dtype: "f32" });
    const got = new Uint8Array(8);
    await backend.download(outb, got);
    expect(new DataView(got.buffer).getFloat32(2, true)).toBe(x.reduce((s, v) => s + v * v, 0));
    await backend.download(xb, bytes);
    expect(Array.from(new Float32Array(bytes.slice(1, 1 + 4 * n).buffer))).toEqual(Array.from(x, (v) => 2 * v));
  });

  it("fills the integer dtypes", async () => {
    const u16 = empty(2 * 37), u32 = empty(4 * 37);
    backend.kernels.fill({ out: u16, n: 37, value: 65535, dtype: "u16" });
    backend.kernels.fill({ out: u32, n: 37, value: 4294967295, dtype: "u32" });
    expect(Array.from(await download(u16, new Uint16Array(37)))).toEqual(new Array(37).fill(65535));
    expect(Array.from(await download(u32, new Uint32Array(37)))).toEqual(new Array(37).fill(4294967295));
  });
});
