import { type Backend, gelu, geluGrad, silu, siluGrad } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";

// f32 GELU / SiLU against the f64 formulas well beyond the conformance range [-4, 4],
// through the saturated tails, and at the edges of f32.
const grid = (lo: number, hi: number, n: number) => Array.from({ length: n }, (_, i) => lo + ((hi - lo) * i) / (n - 1));
const EXTREMES = [-3e38, -1e10, -1e4, -200, -104, -88.5, -87.5, -87, -50, -1e-30, 0, -0, 1e-30, 1e-6, 50, 87, 88.5, 104, 200, 1e4, 1e10, 3e38];
const INPUTS = Float32Array.from([...grid(-20, 20, 40_001), ...grid(-1, 1, 20_001), ...EXTREMES]);
const RTOL = 2e-4;
const ATOL = 1e-6;

describe("activation accuracy in f32", () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await createWasmBackend({ threads: 2, measurePeak: false });
  });
  afterAll(() => backend.dispose());

  async function run(kernel: "geluForward" | "geluBackward" | "siluForward" | "siluBackward", x: Float32Array): Promise<Float32Array> {
    const n = x.length;
    const bx = backend.alloc(n * 4);
    const bd = backend.alloc(n * 4);
    const bo = backend.alloc(n * 4);
    backend.upload(bx, x);
    backend.upload(bd, new Float32Array(n).fill(1));
    if (kernel.endsWith("Forward")) backend.kernels[kernel as "geluForward"]({ x: bx, out: bo, n, dtype: "f32" });
    else backend.kernels[kernel as "geluBackward"]({ x: bx, dOut: bd, dX: bo, n, dtype: "f32" });
    const out = new Float32Array(n);
    await backend.download(bo, out);
    for (const b of [bx, bd, bo]) backend.free(b);
    return out;
  }

  const cases = [
    ["geluForward", gelu],
    ["geluBackward", geluGrad],
    ["siluForward", silu],
    ["siluBackward", siluGrad],
  ] as const;
  for (const [kernel, f] of cases) {
    it(`${kernel} is within ${RTOL} relative (+${ATOL}) of f64 over [-20, 20] and saturates beyond`, async () => {
      const got = await run(kernel, INPUTS);
      let worst = { x: 0, got: 0, want: 0, excess: 0 };
      for (let i = 0; i < INPUTS.length; i++) {
        const x = INPUTS[i];
        const want = Math.fround(f(x));
        const excess = Number.isFinite(want) || Number.isNaN(want) ? Math.abs(got[i] - want) / (RTOL * Math.abs(want) + ATOL) : got[i] === want ? 0 : Infinity;
        if (!(excess <= worst.excess) && !(Number.isNaN(want) && Number.isNaN(got[i]))) worst = { x, got: got[i], want, excess };
      }
      expect(worst.excess, `worst at x=${worst.x}: got ${worst.got}, want ${worst.want}`).toBeLessThanOrEqual(1);
    });
  }

  it("saturates exactly: gelu(x) = x and silu(x) = x for large x, 0 for very negative x", async () => {
    const x = Float32Array.from([30, 100, 1e4, 3e38, -30, -100, -1e4]);
    const g = await run("geluForward", x);
    const s = await run("siluForward", x.map((v) => (v === 30 ? 120 : v === -30 ? -120 : v)));
    expect(Array.from(g.subarray(0, 4))).toEqual([30, 100, 1e4, Math.fround(3e38)]);
    expect(Array.from(g.subarray(4)).every((v) => v === 0)).toBe(true);
    expect(Array.from(s.subarray(0, 4))).toEqual([120, 100, 1e4, Math.fround(3e38)]);
    expect(Array.from(s.subarray(4)).every((v) => v === 0)).toBe(true);
    const dg = await run("geluBackward", x);
    expect(Array.from(dg)).toEqual([1, 1, 1, 1, 0, 0, 0]);
  });
});
