import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  bf16ToF32,
  f16ToF32,
  f32BitsToBf16Bits,
  f32BitsToF16Bits,
  f32ToBf16,
  f32ToF16,
  f64ToBf16,
  f64ToF16,
} from "../src/half.js";

const f32Box = new Float32Array(1);
const u32Box = new Uint32Array(f32Box.buffer);

function f32FromBits(bits: number): number {
  u32Box[0] = bits >>> 0;
  return f32Box[0];
}

function isBf16NaN(h: number): boolean {
  return (h & 0x7f80) === 0x7f80 && (h & 0x007f) !== 0;
}

function isF16NaN(h: number): boolean {
  return (h & 0x7c00) === 0x7c00 && (h & 0x03ff) !== 0;
}

const hex = (h: number) => `0x${h.toString(16).padStart(4, "0")}`;

describe("bf16: hand-known bit patterns", () => {
  it("encodes 1.0 as 0x3f80 and -2.0 as 0xc000", () => {
    expect(hex(f32ToBf16(1))).toBe("0x3f80");
    expect(hex(f32ToBf16(-2))).toBe("0xc000");
    expect(hex(f64ToBf16(1))).toBe("0x3f80");
    expect(hex(f64ToBf16(-2))).toBe("0xc000");
  });

  it("decodes 0x3f80 to 1.0, 0xc000 to -2.0 and 0x4049 to 3.140625", () => {
    expect(bf16ToF32(0x3f80)).toBe(1);
    expect(bf16ToF32(0xc000)).toBe(-2);
    expect(bf16ToF32(0x4049)).toBe(3.140625);
  });

  it("rounds a value halfway between two bf16 numbers to the one with an even mantissa", () => {
    // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81, odd).
    expect(hex(f32ToBf16(1 + 2 ** -8))).toBe("0x3f80");
    expect(hex(f64ToBf16(1 + 2 ** -8))).toBe("0x3f80");
    // 1 + 3*2^-8 lies halfway between 0x3f81 (odd) and 0x3f82 (even).
    expect(hex(f32ToBf16(1 + 3 * 2 ** -8))).toBe("0x3f82");
    expect(hex(f64ToBf16(1 + 3 * 2 ** -8))).toBe("0x3f82");
    // Negative ties behave the same on the magnitude.
    expect(hex(f32ToBf16(-(1 + 2 ** -8)))).toBe("0xbf80");
    expect(hex(f32ToBf16(-(1 + 3 * 2 ** -8)))).toBe("0xbf82");
  });

  it("rounds just past a tie away from the even neighbour", () => {
    expect(hex(f32ToBf16(1 + 2 ** -8 + 2 ** -20))).toBe("0x3f81");
    expect(hex(f32ToBf16(1 + 2 ** -8 - 2 ** -20))).toBe("0x3f80");
  });

  it("f64ToBf16 rounds once where going through f32 would round twice", () => {
    // f32 rounds 1 + 2^-8 + 2^-30 down to the tie 1 + 2^-8, which then goes to even (1.0);
    // the single rounding sees a value above the tie and goes up.
    const x = 1 + 2 ** -8 + 2 ** -30;
    expect(hex(f32ToBf16(x))).toBe("0x3f80");
    expect(hex(f64ToBf16(x))).toBe("0x3f81");
  });

  it("keeps NaN a NaN, including NaNs whose payload lies only in the low 16 bits", () => {
    expect(isBf16NaN(f32ToBf16(NaN))).toBe(true);
    expect(isBf16NaN(f64ToBf16(NaN))).toBe(true);
    // Truncating 0x7f800001 would give 0x7f80 = +inf.
    expect(hex(f32BitsToBf16Bits(0x7f800001))).toBe("0x7fc0");
    expect(hex(f32BitsToBf16Bits(0xff800001))).toBe("0xffc0");
    // Rounding up 0x7fffffff must not carry out of the NaN space.
    expect(isBf16NaN(f32BitsToBf16Bits(0x7fffffff))).toBe(true);
    expect(f32BitsToBf16Bits(0xffffffff) & 0x8000).toBe(0x8000);
    expect(Number.isNaN(bf16ToF32(0x7fc0))).toBe(true);
  });

  it("keeps the sign of -0 in both directions", () => {
    expect(hex(f32ToBf16(-0))).toBe("0x8000");
    expect(hex(f64ToBf16(-0))).toBe("0x8000");
    expect(hex(f32ToBf16(0))).toBe("0x0000");
    expect(Object.is(bf16ToF32(0x8000), -0)).toBe(true);
  });

  it("keeps infinities and overflows values above the largest bf16 to infinity", () => {
    expect(hex(f32ToBf16(Infinity))).toBe("0x7f80");
    expect(hex(f32ToBf16(-Infinity))).toBe("0xff80");
    expect(hex(f64ToBf16(-Infinity))).toBe("0xff80");
    // Largest bf16: (2 - 2^-7) * 2^127 = 0x7f7f.
    const max = (2 - 2 ** -7) * 2 ** 127;
    expect(bf16ToF32(0x7f7f)).toBe(max);
    expect(hex(f64ToBf16(max))).toBe("0x7f7f");
    // Just below the tie with 2^128 stays finite, the tie itself goes to even (= inf).
    expect(hex(f32BitsToBf16Bits(0x7f7f7fff))).toBe("0x7f7f");
    expect(hex(f32BitsToBf16Bits(0x7f7f8000))).toBe("0x7f80");
    expect(hex(f32ToBf16(3.4028234663852886e38))).toBe("0x7f80"); // f32 max
    expect(hex(f64ToBf16(1e39))).toBe("0x7f80");
    expect(hex(f64ToBf16(-1e39))).toBe("0xff80");
    expect(hex(f64ToBf16((2 - 2 ** -8) * 2 ** 127))).toBe("0x7f80");
    expect(hex(f64ToBf16((2 - 2 ** -8 - 2 ** -20) * 2 ** 127))).toBe("0x7f7f");
  });

  it("keeps subnormals: 2^-133 is 0x0001 and half of it ties to 0", () => {
    expect(bf16ToF32(0x0001)).toBe(2 ** -133);
    expect(hex(f32ToBf16(2 ** -133))).toBe("0x0001");
    expect(hex(f64ToBf16(2 ** -133))).toBe("0x0001");
    expect(hex(f64ToBf16(2 ** -134))).toBe("0x0000");
    expect(hex(f64ToBf16(3 * 2 ** -134))).toBe("0x0002");
    expect(hex(f64ToBf16(-(2 ** -133)))).toBe("0x8001");
  });
});

describe("f16: hand-known bit patterns", () => {
  it("encodes 1.0 as 0x3c00, -2.0 as 0xc000 and 65504 as 0x7bff", () => {
    for (const enc of [f32ToF16, f64ToF16]) {
      expect(hex(enc(1))).toBe("0x3c00");
      expect(hex(enc(-2))).toBe("0xc000");
      expect(hex(enc(65504))).toBe("0x7bff");
      expect(hex(enc(0.5))).toBe("0x3800");
    }
  });

  it("decodes 0x3c00, 0xc000, 0x7bff, 0x3555", () => {
    expect(f16ToF32(0x3c00)).toBe(1);
    expect(f16ToF32(0xc000)).toBe(-2);
    expect(f16ToF32(0x7bff)).toBe(65504);
    expect(f16ToF32(0x3555)).toBe(0.333251953125);
  });

  it("rounds 65520 (halfway from 65504 to 65536) to infinity and 65519 to 65504", () => {
    for (const enc of [f32ToF16, f64ToF16]) {
      expect(hex(enc(65520))).toBe("0x7c00");
      expect(hex(enc(-65520))).toBe("0xfc00");
      expect(hex(enc(65519))).toBe("0x7bff");
      expect(hex(enc(1e6))).toBe("0x7c00");
      expect(hex(enc(Infinity))).toBe("0x7c00");
      expect(hex(enc(-Infinity))).toBe("0xfc00");
    }
    expect(hex(f64ToF16(65519.99999))).toBe("0x7bff");
  });

  it("encodes the smallest subnormal 2^-24 as 0x0001 and the largest as 0x03ff", () => {
    for (const enc of [f32ToF16, f64ToF16]) {
      expect(hex(enc(2 ** -24))).toBe("0x0001");
      expect(hex(enc(1023 * 2 ** -24))).toBe("0x03ff");
      expect(hex(enc(2 ** -14))).toBe("0x0400");
    }
    expect(f16ToF32(0x0001)).toBe(2 ** -24);
    expect(f16ToF32(0x03ff)).toBe(1023 * 2 ** -24);
    expect(f16ToF32(0x8001)).toBe(-(2 ** -24));
  });

  it("rounds 2^-25 (half the smallest subnormal) to zero and anything above it up", () => {
    for (const enc of [f32ToF16, f64ToF16]) {
      expect(hex(enc(2 ** -25))).toBe("0x0000");
      expect(hex(enc(-(2 ** -25)))).toBe("0x8000");
      expect(hex(enc(2 ** -25 + 2 ** -40))).toBe("0x0001");
      expect(hex(enc(3 * 2 ** -25))).toBe("0x0002"); // tie between 1 and 2 -> even
      expect(hex(enc(5 * 2 ** -25))).toBe("0x0002"); // tie between 2 and 3 -> even
      expect(hex(enc(2 ** -26))).toBe("0x0000");
    }
  });

  it("rounds ties between normal numbers to even", () => {
    for (const enc of [f32ToF16, f64ToF16]) {
      expect(hex(enc(1 + 2 ** -11))).toBe("0x3c00");
      expect(hex(enc(1 + 3 * 2 ** -11))).toBe("0x3c02");
      // Tie that carries into the next binade: (2 - 2^-11) lies between 0x3fff and 2.0 (0x4000).
      expect(hex(enc(2 - 2 ** -11))).toBe("0x4000");
    }
  });

  it("f64ToF16 rounds once where going through f32 would round twice", () => {
    const x = 1 + 2 ** -11 + 2 ** -30;
    expect(hex(f32ToF16(x))).toBe("0x3c00");
    expect(hex(f64ToF16(x))).toBe("0x3c01");
  });

  it("keeps NaN a NaN with its sign, whatever the payload", () => {
    expect(isF16NaN(f32ToF16(NaN))).toBe(true);
    expect(isF16NaN(f64ToF16(NaN))).toBe(true);
    expect(isF16NaN(f32BitsToF16Bits(0x7f800001))).toBe(true);
    expect(isF16NaN(f32BitsToF16Bits(0xff800001))).toBe(true);
    expect(f32BitsToF16Bits(0xff800001) & 0x8000).toBe(0x8000);
    expect(Number.isNaN(f16ToF32(0x7e00))).toBe(true);
    expect(Number.isNaN(f16ToF32(0xfc01))).toBe(true);
  });

  it("keeps the sign of -0 in both directions", () => {
    expect(hex(f32ToF16(-0))).toBe("0x8000");
    expect(hex(f64ToF16(-0))).toBe("0x8000");
    expect(Object.is(f16ToF32(0x8000), -0)).toBe(true);
    expect(Object.is(f16ToF32(0x0000), 0)).toBe(true);
  });
});

// ---- property tests -------------------------------------------------------

/** Any f32 bit pattern. */
const anyF32Bits = fc.integer({ min: 0, max: 0xffffffff });

/** f32 bit patterns whose exponent lies in or near f16's range (subnormals to overflow). */
const f16RangeF32Bits = fc
  .record({
    sign: fc.integer({ min: 0, max: 1 }),
    exp: fc.integer({ min: 127 - 27, max: 127 + 17 }),
    mant: fc.integer({ min: 0, max: 0x7fffff }),
  })
  .map(({ sign, exp, mant }) => ((sign << 31) | (exp << 23) | mant) >>> 0);

/** f32 bit patterns that sit exactly on or next to a 16-bit rounding tie. */
function nearTieBits(lowBits: number): fc.Arbitrary<number> {
  const tie = 1 << (lowBits - 1);
  return fc
    .record({ base: anyF32Bits, delta: fc.integer({ min: -1, max: 1 }) })
    .map(({ base, delta }) => (((base >>> lowBits) << lowBits) + tie + delta) >>> 0);
}

const RUNS = { numRuns: 20_000 };

const f64Box = new Float64Array(1);
const f64WordsBox = new Uint32Array(f64Box.buffer);

/**
 * Doubles whose mantissa sits on or next to a rounding tie of a 16-bit format keeping
 * `keptBits` mantissa bits, with the exponent anywhere in `exp` (unbiased): the high word's
 * bits below the kept ones are a tie, and the low word 0 (an exact tie), 1 or any value
 * (above it); or the tie minus one unit in the last place (below it).
 */
function nearTieDoubles(keptBits: number, exp: { min: number; max: number }): fc.Arbitrary<number> {
  const drop = 20 - keptBits;
  return fc
    .record({
      sign: fc.integer({ min: 0, max: 1 }),
      exp: fc.integer(exp),
      kept: fc.integer({ min: 0, max: (1 << keptBits) - 1 }),
      low: fc.oneof(fc.constant(0), fc.constant(1), fc.integer({ min: 0, max: 0xffffffff })),
      below: fc.boolean(),
    })
    .map(({ sign, exp, kept, low, below }) => {
      f64WordsBox[1] = ((sign << 31) | ((exp + 1023) << 20) | (kept << drop) | (1 << (drop - 1))) >>> 0;
      f64WordsBox[0] = low;
      const x = f64Box[0];
      return below && low === 0 ? x - Math.sign(x) * 2 ** (exp - 52) : x;
    });
}

/**
 * Checks that `bits` (a 16-bit encoding of x) is the nearest value to x, ties to even:
 * the encoded magnitude is no farther from |x| than either neighbour, and on a tie it is even.
 * `decodeMag` maps a magnitude code to its value, with the infinity code standing for the
 * first value past the largest finite one (where IEEE overflow rounding puts it).
 */
function expectNearest(x: number, bits: number, infCode: number, decodeMag: (m: number) => number): void {
  const problem = nearestProblem(x, bits, infCode, decodeMag);
  if (problem !== null) expect.fail(`${x} encoded as ${hex(bits)}: ${problem}`);
}

function nearestProblem(x: number, bits: number, infCode: number, decodeMag: (m: number) => number): string | null {
  if ((bits & 0x8000) !== (x < 0 || Object.is(x, -0) ? 0x8000 : 0)) return "wrong sign";
  const ax = Math.abs(x);
  const mag = bits & 0x7fff;
  if (mag > infCode) return "NaN";
  const y = decodeMag(mag);
  const err = Math.abs(ax - y);
  for (const nb of [mag - 1, mag + 1]) {
    if (nb < 0 || nb > infCode) continue;
    const nerr = Math.abs(ax - decodeMag(nb));
    if (err > nerr) return `neighbour ${hex(nb)} is nearer`;
    if (err === nerr && (mag & 1) !== 0) return `tie with ${hex(nb)} not rounded to even`;
  }
  // Within half an ulp of the gap on the side where x lies.
  const side = ax >= y ? mag + 1 : mag - 1;
  if (side >= 0 && side <= infCode && err > Math.abs(decodeMag(side) - y) / 2) return "more than half an ulp away";
  return null;
}

const bf16Mag = (m: number) => (m === 0x7f80 ? 2 ** 128 : bf16ToF32(m));
const f16Mag = (m: number) => (m === 0x7c00 ? 65536 : f16ToF32(m));

describe("bf16: properties over random f32 bit patterns", () => {
  it("f32BitsToBf16Bits equals f64ToBf16 of the same value for every non-NaN value", () => {
    for (const arb of [anyF32Bits, nearTieBits(16)]) {
      fc.assert(
        fc.property(arb, (bits) => {
          const x = f32FromBits(bits);
          const fromBits = f32BitsToBf16Bits(bits);
          if (Number.isNaN(x)) {
            expect(isBf16NaN(fromBits)).toBe(true);
            expect(fromBits & 0x8000).toBe((bits >>> 16) & 0x8000);
            return;
          }
          const fromF64 = f64ToBf16(x);
          if (fromBits !== fromF64) expect.fail(`${x}: f32BitsToBf16Bits ${hex(fromBits)} != f64ToBf16 ${hex(fromF64)}`);
        }),
        RUNS,
      );
    }
  });

  it("f32ToBf16 picks the nearest bf16, ties to even", () => {
    for (const arb of [anyF32Bits, nearTieBits(16)]) {
      fc.assert(
        fc.property(arb, (bits) => {
          const x = f32FromBits(bits);
          if (!Number.isFinite(x)) return;
          expectNearest(x, f32ToBf16(x), 0x7f80, bf16Mag);
        }),
        RUNS,
      );
    }
  });

  it("f64ToBf16 picks the nearest bf16 for arbitrary doubles", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true, min: -4e38, max: 4e38 }), (x) => {
        expectNearest(x, f64ToBf16(x), 0x7f80, bf16Mag);
      }),
      RUNS,
    );
  });

  it("f64ToBf16 rounds doubles on and beside a tie (bits below f32's too) to the nearest, ties to even", () => {
    fc.assert(
      fc.property(nearTieDoubles(7, { min: -140, max: 127 }), (x) => {
        expectNearest(x, f64ToBf16(x), 0x7f80, bf16Mag);
      }),
      RUNS,
    );
  });
});

describe("f16: properties over random f32 bit patterns", () => {
  it("f32BitsToF16Bits equals f64ToF16 for every f32 value, subnormals included", () => {
    for (const arb of [anyF32Bits, f16RangeF32Bits, nearTieBits(13)]) {
      fc.assert(
        fc.property(arb, (bits) => {
          const x = f32FromBits(bits);
          const fromBits = f32BitsToF16Bits(bits);
          if (Number.isNaN(x)) {
            expect(isF16NaN(fromBits)).toBe(true);
            expect(fromBits & 0x8000).toBe((bits >>> 16) & 0x8000);
            return;
          }
          const fromF64 = f64ToF16(x);
          if (fromBits !== fromF64) expect.fail(`${x}: f32BitsToF16Bits ${hex(fromBits)} != f64ToF16 ${hex(fromF64)}`);
        }),
        RUNS,
      );
    }
  });

  it("f32ToF16 picks the nearest f16, ties to even", () => {
    for (const arb of [f16RangeF32Bits, nearTieBits(13), anyF32Bits]) {
      fc.assert(
        fc.property(arb, (bits) => {
          const x = f32FromBits(bits);
          if (!Number.isFinite(x)) return;
          expectNearest(x, f32ToF16(x), 0x7c00, f16Mag);
        }),
        RUNS,
      );
    }
  });

  it("f64ToF16 picks the nearest f16 for arbitrary doubles in and around its range", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true, min: -70000, max: 70000 }), (x) => {
        expectNearest(x, f64ToF16(x), 0x7c00, f16Mag);
      }),
      RUNS,
    );
  });

  it("f64ToF16 rounds doubles on and beside a tie (bits below f32's too) to the nearest, ties to even", () => {
    fc.assert(
      fc.property(nearTieDoubles(10, { min: -27, max: 15 }), (x) => {
        expectNearest(x, f64ToF16(x), 0x7c00, f16Mag);
      }),
      RUNS,
    );
  });
});

describe("round trips over every 16-bit pattern", () => {
  it("bf16: decode then encode gives the same bits for all 65536 patterns (NaNs stay NaN)", () => {
    const bad: string[] = [];
    for (let h = 0; h < 0x10000; h++) {
      const x = bf16ToF32(h);
      if (isBf16NaN(h)) {
        if (!Number.isNaN(x) || !isBf16NaN(f32ToBf16(x)) || !isBf16NaN(f64ToBf16(x))) bad.push(hex(h));
        continue;
      }
      if (f32ToBf16(x) !== h || f64ToBf16(x) !== h) bad.push(hex(h));
    }
    expect(bad).toEqual([]);
  });

  it("f16: decode then encode gives the same bits for all 65536 patterns (NaNs stay NaN)", () => {
    const bad: string[] = [];
    for (let h = 0; h < 0x10000; h++) {
      const x = f16ToF32(h);
      if (isF16NaN(h)) {
        if (!Number.isNaN(x) || !isF16NaN(f32ToF16(x)) || !isF16NaN(f64ToF16(x))) bad.push(hex(h));
        continue;
      }
      if (f32ToF16(x) !== h || f64ToF16(x) !== h) bad.push(hex(h));
    }
    expect(bad).toEqual([]);
  });

  it("f16ToF32 decodes every non-NaN pattern to a value exact in f32", () => {
    const inexact: string[] = [];
    for (let h = 0; h < 0x10000; h++) {
      if (isF16NaN(h)) continue;
      const x = f16ToF32(h);
      if (!Object.is(Math.fround(x), x)) inexact.push(hex(h));
    }
    expect(inexact).toEqual([]);
  });
});
