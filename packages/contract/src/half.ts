// Conversions between f32/f64 and the 16-bit float formats, bit-exact with
// hardware conversion: round to nearest, ties to even; NaN stays NaN (quiet);
// overflow goes to infinity; f16 keeps subnormals.
//
// bf16 = the top 16 bits of an f32 (1 sign, 8 exponent, 7 mantissa).
// f16  = IEEE binary16 (1 sign, 5 exponent, 10 mantissa, bias 15).

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const f64 = new Float64Array(1);
const f64Words = new Uint32Array(f64.buffer); // [low, high] on every little-endian host

/** 2^k for k in [-1074, 1023] at POW2[k + 1074]: exact, and no Math.pow in the loops below. */
const POW2 = Float64Array.from({ length: 2098 }, (_, i) => 2 ** (i - 1074));

/** floor(log2(ax)) for a positive finite normal f64 from its exponent bits; -1023 for a subnormal. */
function exponentOf(ax: number): number {
  f64[0] = ax;
  return ((f64Words[1] >>> 20) & 0x7ff) - 1023;
}

/** f32 bits -> bf16 bits, round to nearest even (what CUDA's __float2bfloat16_rn does). */
export function f32BitsToBf16Bits(bits: number): number {
  bits >>>= 0;
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) {
    return ((bits >>> 16) | 0x0040) & 0xffff; // quiet NaN, keep sign
  }
  const lsb = (bits >>> 16) & 1;
  return ((bits + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** A number (as f32) -> bf16 bits. The number is first rounded to f32. */
export function f32ToBf16(x: number): number {
  f32[0] = x;
  return f32BitsToBf16Bits(u32[0]);
}

/** bf16 bits -> number. Exact. */
export function bf16ToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0];
}

/**
 * A normal f64 -> the 16-bit format's bits (1 sign, `expBits` exponent, `mantBits` mantissa)
 * when the result is normal too: the f64's top mantissa bits, rounded to nearest even on the
 * bits below them; a carry out of the mantissa moves to the next exponent, or to infinity.
 * -1 outside that range (zero, subnormal results, overflow, infinities, NaN).
 */
function f64ToHalfNormal(x: number, expBits: number, mantBits: number): number {
  f64[0] = x;
  const hi = f64Words[1], lo = f64Words[0];
  const bias = (1 << (expBits - 1)) - 1;
  const e = ((hi >>> 20) & 0x7ff) - 1023 + bias; // the result's biased exponent
  if (e < 1 || e > 2 * bias) return -1;
  const drop = 20 - mantBits; // mantissa bits of the high word below the kept ones
  let h = (e << mantBits) | ((hi >>> drop) & ((1 << mantBits) - 1));
  const round = (hi >>> (drop - 1)) & 1;
  const sticky = (hi & ((1 << (drop - 1)) - 1)) !== 0 || lo !== 0;
  if (round && (sticky || (h & 1) !== 0)) h += 1;
  return ((hi >>> 16) & 0x8000) | h;
}

/** A number (f64) -> bf16 bits with a single correct rounding (no f32 step). */
export function f64ToBf16(x: number): number {
  const fast = f64ToHalfNormal(x, 8, 7);
  if (fast >= 0) return fast;
  if (Number.isNaN(x)) return 0x7fc0;
  // Round the f64 mantissa directly to 8 significant bits.
  f64[0] = x;
  const sign = (f64Words[1] >>> 31) << 15;
  const ax = Math.abs(x);
  if (ax === 0) return sign;
  if (ax === Infinity) return sign | 0x7f80;
  // bf16 has f32's exponent range; subnormals below 2^-126 have step 2^-133.
  const e = Math.max(exponentOf(ax), -126);
  const step = POW2[e - 7 + 1074];
  const q = roundHalfEven(ax / step) * step;
  return sign | f32ToBf16(q); // q is exactly representable in bf16 (or overflows to inf)
}

/** f32 bits -> f16 bits, round to nearest even, with subnormals and overflow to inf. */
export function f32BitsToF16Bits(bits: number): number {
  bits >>>= 0;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x0200 | (mant >>> 13) : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // rounds to zero (even 0.5ulp: ties to even -> 0)
    mant |= 0x800000;
    const shift = 14 - e; // 14..24
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let h = mant >>> shift;
    if (rest > half || (rest === half && (h & 1) === 1)) h += 1;
    return sign | h;
  }
  const rest = mant & 0x1fff;
  let h = (e << 10) | (mant >>> 13);
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h += 1; // may carry into exponent / inf
  return sign | h;
}

export function f32ToF16(x: number): number {
  f32[0] = x;
  return f32BitsToF16Bits(u32[0]);
}

/** Every f16 value by its bits (exact in f32), filled on first use. */
let f16Values: Float32Array | undefined;

/** f16 bits -> number. Exact. */
export function f16ToF32(h: number): number {
  if (!f16Values) f16Values = Float32Array.from({ length: 65536 }, (_, bits) => f16BitsToNumber(bits));
  return f16Values[h & 0xffff];
}

function f16BitsToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** A number (f64) -> f16 bits with a single correct rounding. */
export function f64ToF16(x: number): number {
  const fast = f64ToHalfNormal(x, 5, 10);
  if (fast >= 0) return fast;
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const ax = Math.abs(x);
  if (ax === 0) return sign;
  if (ax >= 65520) return sign | 0x7c00; // 65504 + half ulp rounds to inf
  const e = Math.max(exponentOf(ax), -14);
  const step = POW2[e - 10 + 1074];
  const q = roundHalfEven(ax / step) * step; // exactly representable in f16
  return sign | f32ToF16(q);
}

function roundHalfEven(v: number): number {
  const r = Math.round(v);
  // Math.round rounds .5 up; fix ties to even.
  if (Math.abs(v % 1) === 0.5 && r % 2 !== 0) return r - 1;
  return r;
}
