import { expect } from "vitest";
import { type Backend, createReferenceBackend, decodeElements, encodeToBytes } from "@kiln/contract";
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
