import { expect } from "vitest";
import { type Backend, type FloatDType, type Operand, bytesPerElement, createReferenceBackend, decodeElements, encodeToBytes } from "@kiln/contract";
import type { Communicator } from "@kiln/distributed";

/** Two ranks all-reduce (sum) four bf16 values: every rank must hold the f32 sums of the widened values, rounded once to bf16. */
export async function expectBf16SumRoundedOnce(comms: readonly Communicator[]): Promise<void> {
  const backends = comms.map(() => createReferenceBackend());
  const parts = [Float32Array.of(1, 0.1, -3, 100), Float32Array.of(1 / 256, 0.2, 3, 0.4)];
  const ats = comms.map((_, r) => {
    const buffer = backends[r].alloc(8);
    backends[r].upload({ buffer, byteOffset: 0 }, encodeToBytes(parts[r], "bf16"));
    return { buffer, byteOffset: 0 };
  });
  await Promise.all(comms.map((c, r) => c.allReduce(backends[r], ats[r], 4, "bf16", "sum")));
  const widen = (x: Float32Array) => Array.from(decodeElements(encodeToBytes(x, "bf16"), "bf16", 4));
  const [a, b] = parts.map(widen);
  const expected = widen(Float32Array.from(a, (x, i) => Math.fround(x + b[i])));
  for (let r = 0; r < 2; r++) {
    const bytes = new Uint8Array(8);
    await backends[r].download(ats[r], bytes);
    expect(Array.from(decodeElements(bytes, "bf16", 4))).toEqual(expected);
  }
}

/** f32 values uploaded 16 bytes into a fresh buffer (an operand that does not start its buffer). */
export function f32Operand(backend: Backend, values: Float32Array) {
  const buffer = backend.alloc(values.byteLength + 16);
  const at = { buffer, byteOffset: 16 };
  backend.upload(at, values);
  return at;
}

/** Values of rank r: spread over magnitudes so that the order of additions shows in the rounding. */
export const valuesOf = (r: number, n: number) => Float32Array.from({ length: n }, (_, i) => Math.fround((r + 1) * 0.1 * Math.sin(i + r) * 10 ** ((i % 7) - 3)));

/** The reduce-scatter cases every host-staged communicator runs: awkward chunk lengths in both dtypes and ops, and chunks beyond a shared-memory round (1_048_576 values at most). */
export const REDUCE_SCATTER_CASES = [
  ...[1, 7, 4003].flatMap((n) => (["f32", "bf16"] as const).flatMap((dtype) => (["sum", "mean"] as const).map((op) => ({ n, dtype, op })))),
  { n: 1_100_003, dtype: "f32", op: "sum" },
  { n: 1_100_003, dtype: "bf16", op: "mean" },
] as const;

/** Rank r's reduce-scatter input: valuesOf(r, count) in `dtype`. */
const inputOf = (r: number, count: number, dtype: FloatDType) => encodeToBytes(valuesOf(r, count), dtype);

/**
 * Every rank's buffer of worldSize chunks of n after `collective` (each rank
 * starting from inputOf(rank)), its own chunk cut out: rank r's chunk r.
 */
export async function ownChunks(comms: readonly Communicator[], n: number, dtype: FloatDType, collective: (c: Communicator, b: Backend, at: Operand) => Promise<void>): Promise<Uint8Array[]> {
  const size = comms.length;
  const chunk = n * bytesPerElement(dtype);
  const backends = comms.map(() => createReferenceBackend());
  const ats = comms.map((_, r) => {
    const at = { buffer: backends[r].alloc(size * chunk + 16), byteOffset: 16 };
    backends[r].upload(at, inputOf(r, size * n, dtype));
    return at;
  });
  await Promise.all(comms.map((c, r) => collective(c, backends[r], ats[r])));
  return Promise.all(
    ats.map(async (at, r) => {
      const out = new Uint8Array(size * chunk);
      await backends[r].download(at, out);
      return out.slice(r * chunk, (r + 1) * chunk);
    }),
  );
}

/** Chunk c (for every c) of the ranks' inputs, summed in f32 in the order `order(c)` gives the ranks, divided for a mean, rounded once to `dtype`. */
export function expectedChunks(size: number, n: number, dtype: FloatDType, op: "sum" | "mean", order: (c: number) => number[]): Uint8Array[] {
  const widened = [...Array(size).keys()].map((r) => decodeElements(inputOf(r, size * n, dtype), dtype, size * n));
  return [...Array(size).keys()].map((c) => {
    const [first, ...rest] = order(c);
    const acc = Float32Array.from(widened[first].subarray(c * n, (c + 1) * n));
    for (const r of rest) for (let i = 0; i < n; i++) acc[i] += widened[r][c * n + i];
    if (op === "mean") for (let i = 0; i < n; i++) acc[i] /= size;
    return encodeToBytes(acc, dtype);
  });
}

/** All-gather of `bytes` bytes a chunk: rank r fills its chunk r (the others hold junk); every rank must end with every rank's chunk. */
export async function expectAllGathered(comms: readonly Communicator[], bytes: number): Promise<void> {
  const size = comms.length;
  const pattern = (r: number) => Uint8Array.from({ length: bytes }, (_, i) => (r * 89 + i * 7 + (i >> 8)) & 0xff);
  const backends = comms.map(() => createReferenceBackend());
  const ats = comms.map((_, r) => {
    const at = { buffer: backends[r].alloc(size * bytes + 16), byteOffset: 16 };
    const mine = new Uint8Array(size * bytes).fill(0xa5 ^ r);
    mine.set(pattern(r), r * bytes);
    backends[r].upload(at, mine);
    return at;
  });
  await Promise.all(comms.map((c, r) => c.allGather(backends[r], ats[r], bytes)));
  const expected = Buffer.concat([...Array(size).keys()].map(pattern));
  for (let r = 0; r < size; r++) {
    const out = new Uint8Array(size * bytes);
    await backends[r].download(ats[r], out);
    expect(Buffer.from(out).equals(expected), `all-gather of ${bytes} bytes on rank ${r}`).toBe(true);
  }
}
