import type { Backend } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";
import { BackendBuffers } from "./support/backend-buffers.js";

// Every 16-bit pattern through the conversions of csrc/kiln_storage.h, which every
// kernel family uses: the cast kernel (elementwise loads and stores) and a 16-bit
// matmul against the identity (the matmul's packing and its epilogue).

const ALL16 = Uint16Array.from({ length: 65536 }, (_, h) => h);

/** f32 bits of an f16 pattern, from its fields: exact, NaN payloads kept. */
function f16ToF32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (mant << 13)) >>> 0;
  const magnitude = exp === 0 ? mant * 2 ** -24 : (1024 + mant) * 2 ** (exp - 25);
  return (sign | new Uint32Array(new Float32Array([magnitude]).buffer)[0]) >>> 0;
}

const hex = (x: number) => `0x${x.toString(16)}`;

/** Indices where got and want differ, as "index: got want" (at most 5). */
function mismatches(got: ArrayLike<number>, want: ArrayLike<number>): string[] {
  const out: string[] = [];
  for (let i = 0; i < want.length && out.length < 5; i++) if (got[i] !== want[i]) out.push(`${hex(i)}: ${hex(got[i])} instead of ${hex(want[i])}`);
  return out;
}

for (const simd of ["auto", "plain"] as const) {
  describe(`16-bit storage conversions, every pattern (${simd === "plain" ? "plain SIMD" : "default build"})`, () => {
    let backend: Backend;
    const buffers = new BackendBuffers(() => backend);
    const upload = (data: ArrayBufferView) => buffers.upload(data);
    const empty = (bytes: number) => buffers.empty(bytes);

    beforeAll(async () => {
      // native: false: these are the WebAssembly kernels' conversions (native-conversions.test.ts has the native ones).
      backend = await createWasmBackend({ threads: 2, simd, native: false, minFlopsPerThread: 0, measurePeak: false });
    });
    afterAll(() => {
      buffers.freeAll();
      backend.dispose();
    });

    async function cast(src: Uint16Array | Uint32Array, srcDtype: "f32" | "bf16" | "f16", dstDtype: "f32" | "bf16" | "f16") {
      const n = src.length;
      const dst = empty(n * (dstDtype === "f32" ? 4 : 2));
      backend.kernels.cast({ src: upload(src), dst, n, srcDtype, dstDtype });
      const out = dstDtype === "f32" ? new Uint32Array(n) : new Uint16Array(n);
      await backend.download(dst, out);
      return out;
    }

    it("f16 -> f32 is exact for every pattern (zeros, subnormals, normals, infinities, NaN payloads)", async () => {
      const got = await cast(ALL16, "f16", "f32");
      const want = Uint32Array.from(ALL16, f16ToF32Bits);
      expect(mismatches(got, want)).toEqual([]);
    });

    it("bf16 -> f32 is exact for every pattern", async () => {
      const got = await cast(ALL16, "bf16", "f32");
      expect(mismatches(got, Uint32Array.from(ALL16, (h) => (h << 16) >>> 0))).toEqual([]);
    });

    it("f32 -> f16 and f32 -> bf16 give every pattern back from its f32 value (NaN made quiet)", async () => {
      const f16 = await cast(Uint32Array.from(ALL16, f16ToF32Bits), "f32", "f16");
      const quietF16 = (h: number) => ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0 ? h | 0x0200 : h);
      expect(mismatches(f16, Uint16Array.from(ALL16, quietF16))).toEqual([]);
      const bf16 = await cast(Uint32Array.from(ALL16, (h) => (h << 16) >>> 0), "f32", "bf16");
      const quietBf16 = (h: number) => ((h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0 ? h | 0x0040 : h);
      expect(mismatches(bf16, Uint16Array.from(ALL16, quietBf16))).toEqual([]);
    });

    it("f16 -> bf16 rounds the f32 value to nearest even (casts go through f32)", async () => {
      const bf16 = await cast(ALL16, "f16", "bf16");
      const want = Uint16Array.from(ALL16, (h) => {
        const bits = f16ToF32Bits(h);
        // f16 has 10 mantissa bits, bf16 7: round the f32 to bf16 (nearest even); NaN quiet
        if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return ((bits >>> 16) | 0x40) & 0xffff;
        return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
      });
      expect(mismatches(bf16, want)).toEqual([]);
    });

    // Every finite f16 as a 248 x 256 A times the 256 x 256 identity: each C element is one
    // exact product plus zeros, so C = A (the sign of a zero is the sign of a sum of zeros,
    // so zeros are compared as zeros).
    for (const cDtype of ["f16", "f32"] as const) {
      it(`matmul f16 x identity gives every finite f16 back (C in ${cDtype})`, async () => {
        const finite = ALL16.filter((h) => (h & 0x7c00) !== 0x7c00);
        expect(finite.length).toBe(248 * 256);
        const m = 248, k = 256, n = 256;
        const identity = new Uint16Array(k * n);
        for (let i = 0; i < k; i++) identity[i * n + i] = 0x3c00;
        const c = empty(m * n * (cDtype === "f32" ? 4 : 2));
        backend.kernels.matmul({ a: upload(finite), b: upload(identity), c, m, n, k, dtype: "f16", ...(cDtype === "f32" ? { cDtype } : {}) });
        const got = cDtype === "f32" ? new Uint32Array(m * n) : new Uint16Array(m * n);
        await backend.download(c, got);
        const signBit = cDtype === "f32" ? 0x80000000 : 0x8000;
        const unsignedZero = (x: number) => (x === signBit ? 0 : x);
        const want = cDtype === "f32" ? Uint32Array.from(finite, f16ToF32Bits) : finite;
        expect(mismatches(Array.from(got, unsignedZero), Array.from(want, unsignedZero))).toEqual([]);
      });
    }
  });
}
