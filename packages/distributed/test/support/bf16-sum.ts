import { expect } from "vitest";
import { createReferenceBackend, decodeElements, encodeToBytes } from "@kiln/contract";
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
