import { f32BitsToBf16Bits, f32BitsToF16Bits } from "@kiln/contract";
import { describe, expect, it } from "vitest";
import { loadNativeAddon } from "../src/native-addon-node.js";
import type { NativeIsa, NativeIsaKernels } from "../src/native-addon-types.js";
import { nativeIsas, nativeSkipReason } from "./support/native.js";

// The native matmul's 16-bit conversions (the ones its packing and its epilogue use),
// against @kiln/contract's half.ts, which csrc/kiln_storage.h matches bit for bit:
// widening every 16-bit pattern, and rounding f32 patterns at and around every 16-bit
// value (the ties, one f32 ulp either side), specials, and a million random patterns.

const ALL16 = Uint16Array.from({ length: 65536 }, (_, h) => h);
const BF16 = 1, F16 = 2;

/** f32 bits of an f16 pattern, from its fields: exact, NaN payloads kept. */
function f16ToF32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (mant << 13)) >>> 0;
  const magnitude = exp === 0 ? mant * 2 ** -24 : (1024 + mant) * 2 ** (exp - 25);
  return (sign | new Uint32Array(new Float32Array([magnitude]).buffer)[0]) >>> 0;
}

/** f32 patterns that probe rounding to a 16-bit format whose values sit `shift` f32 bits apart in the mantissa. */
function roundingProbes(valueBits: (h: number) => number, shift: number): Uint32Array {
  const half = 2 ** (shift - 1);
  const out: number[] = [];
  for (let h = 0; h < 65536; h++) {
    const v = valueBits(h);
    for (const d of [0, 1, half - 1, half, half + 1]) out.push((v + d) >>> 0, (v - d) >>> 0);
  }
  let seed = 12345;
  for (let i = 0; i < 1 << 20; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    out.push(seed ^ (i << 3));
  }
  return Uint32Array.from(out);
}

function mismatches(got: ArrayLike<number>, want: ArrayLike<number>, input: ArrayLike<number>): string[] {
  const out: string[] = [];
  for (let i = 0; i < want.length && out.length < 5; i++) {
    if (got[i] !== want[i]) out.push(`0x${(input[i] >>> 0).toString(16)}: 0x${got[i].toString(16)} instead of 0x${want[i].toString(16)}`);
  }
  return out;
}

const skip = nativeSkipReason();

describe.skipIf(skip !== undefined)(`native 16-bit conversions${skip ? ` (skipped: ${skip})` : ""}`, () => {
  for (const isa of nativeIsas()) {
    const kernels = (): NativeIsaKernels => {
      const load = loadNativeAddon();
      if (!("addon" in load)) throw new Error(load.reason);
      return load.addon.kernels(isa as NativeIsa);
    };

    it(`${isa}: bf16 and f16 widen exactly, every pattern (f16 NaN stays NaN with its sign)`, () => {
      const out = new Float32Array(65536);
      const bits = new Uint32Array(out.buffer);
      kernels().widen(ALL16, out, BF16);
      expect(mismatches(bits, Uint32Array.from(ALL16, (h) => (h << 16) >>> 0), ALL16)).toEqual([]);
      kernels().widen(ALL16, out, F16);
      const isNan = (b: number) => (b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0;
      // vcvtph2ps quiets a signalling NaN; any NaN times or plus anything is a quiet NaN anyway.
      const want = Uint32Array.from(ALL16, (h) => (isNan(f16ToF32Bits(h)) ? (f16ToF32Bits(h) | 0x400000) >>> 0 : f16ToF32Bits(h)));
      expect(mismatches(bits, want, ALL16)).toEqual([]);
    });

    for (const [name, dtype, encode, valueBits, shift] of [
      ["bf16", BF16, f32BitsToBf16Bits, (h: number) => (h << 16) >>> 0, 16],
      ["f16", F16, f32BitsToF16Bits, f16ToF32Bits, 13],
    ] as const) {
      it(`${isa}: f32 rounds to ${name} as half.ts rounds (nearest even, NaN quiet, overflow, subnormals)`, () => {
        const input = roundingProbes(valueBits, shift);
        const out = new Uint16Array(input.length);
        kernels().narrow(new Float32Array(input.buffer), out, dtype);
        expect(mismatches(out, Uint16Array.from(input, encode), input)).toEqual([]);
      });
    }
  }
});
