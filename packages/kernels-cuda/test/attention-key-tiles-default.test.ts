import { describe, expect, it } from "vitest";
import { createCudaSimBackend } from "../src/index.js";
import { H100_SHARED_PER_BLOCK, simulatorSkipReason } from "./support/simulator.js";

// The mma.sync attention forward takes key tiles of 64 at heads up to 64 where an SM's
// shared memory holds two blocks of them (an A100's 164 KiB, an H100's 228 KiB) and 32
// where it does not (the consumer GPUs' 100 KiB), unless KILN_ATTENTION_MMA_KEYS says.
// The two tile widths add each row's terms in different orders, so the output's bits
// tell which one ran.

/** A consumer GPU's shared memory a block (opt-in): 99 KiB of the SM's 100. */
const CONSUMER_SHARED_PER_BLOCK = 101376;

/** bf16 bits of deterministic values in [-2, 2). */
function bf16Values(n: number, seed: number): Uint16Array {
  const out = new Uint16Array(n);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    f[0] = (s / 2 ** 32) * 4 - 2;
    out[i] = u[0] >>> 16;
  }
  return out;
}

/** The bf16 output bits of one causal attention forward on a simulator opened with `env` set. */
async function forwardBits(env: Record<string, string>): Promise<Uint16Array> {
  Object.assign(process.env, env);
  let b: ReturnType<typeof createCudaSimBackend>;
  try {
    b = createCudaSimBackend();
  } finally {
    for (const k of Object.keys(env)) delete process.env[k];
  }
  try {
    const batch = 1, seqLen = 160, heads = 1, headDim = 64, n = batch * seqLen * heads * headDim;
    const [q, k, v, out] = [1, 2, 3, 4].map(() => b.alloc(2 * n));
    const lse = b.alloc(4 * batch * heads * seqLen);
    b.upload(q, bf16Values(n, 1));
    b.upload(k, bf16Values(n, 2));
    b.upload(v, bf16Values(n, 3));
    b.kernels.attentionForward({ q, k, v, out, lse, batch, seqLen, heads, kvHeads: heads, headDim, dtype: "bf16" });
    const bits = new Uint16Array(n);
    await b.download(out, bits);
    return bits;
  } finally {
    b.dispose();
  }
}

const skip = simulatorSkipReason();
describe.skipIf(skip)(`the mma.sync attention forward's default key tiles${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("are 64 keys where two blocks fit an SM, 32 where they do not, and what KILN_ATTENTION_MMA_KEYS names", async () => {
    const tiles32 = await forwardBits({ KILN_ATTENTION_MMA_KEYS: "32" });
    const tiles64 = await forwardBits({ KILN_ATTENTION_MMA_KEYS: "64" });
    const same = (a: Uint16Array, b: Uint16Array) => Buffer.from(a.buffer).equals(Buffer.from(b.buffer));
    expect(same(tiles32, tiles64)).toBe(false); // else the bits could not tell the tiles apart
    expect(same(await forwardBits({}), tiles64)).toBe(true); // an A100's shared memory
    expect(same(await forwardBits({ KILN_SIM_SHARED_PER_BLOCK: String(H100_SHARED_PER_BLOCK) }), tiles64)).toBe(true);
    expect(same(await forwardBits({ KILN_SIM_SHARED_PER_BLOCK: String(CONSUMER_SHARED_PER_BLOCK) }), tiles32)).toBe(true);
    const named = await forwardBits({ KILN_SIM_SHARED_PER_BLOCK: String(CONSUMER_SHARED_PER_BLOCK), KILN_ATTENTION_MMA_KEYS: "64" });
    expect(same(named, tiles64)).toBe(true);
  });
});
