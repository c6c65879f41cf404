/*
 * Storage dtypes, for every kernel family: the dtype codes, the conversions
 * between the 16-bit formats and f32 on f32x4 lanes, and loads and stores of
 * a dtype array that convert on the way; also the horizontal sum and max of
 * a vector and the split of a range among threads. (exp and log:
 * kiln_math.h.)
 *
 * Dtype codes (mirrored in src/storage-dtype.ts):
 *   0 f32   4 bytes, IEEE binary32
 *   1 bf16  2 bytes, the top half of an f32 (1 sign, 8 exponent, 7 mantissa)
 *   2 f16   2 bytes, IEEE binary16 (1 sign, 5 exponent, 10 mantissa, bias 15)
 *
 * 16-bit to f32 is exact. f32 to 16-bit rounds to nearest, ties to even; NaN
 * stays a quiet NaN with its sign and top payload bits; overflow goes to
 * infinity; f16 keeps subnormals. Bit-exact with packages/contract/src/half.ts
 * (test/storage-conversions.test.ts tries every 16-bit pattern).
 *
 * An array is addressed by (base, element index, dtype). Every helper takes
 * the dtype as an argument: call it with a constant (one case of a switch)
 * and it inlines into a loop for that dtype alone.
 */
#ifndef KILN_STORAGE_H
#define KILN_STORAGE_H

#include "kiln_simd.h"

#define KILN_DT_F32 0
#define KILN_DT_BF16 1
#define KILN_DT_F16 2

/* ---- 16-bit <-> f32 on four u32 lanes (each holding one 16-bit pattern) ---- */

KILN_INLINE v128_t kiln_bf16_to_f32(v128_t h) { return wasm_i32x4_shl(h, 16); }

/* f16 bits -> f32. With em = the exponent and mantissa bits moved up 13 places:
 *   normal     em + (112 << 23): the exponent rebiased from 15 to 127
 *   subnormal  (em + (113 << 23)) - 2^-14 as floats: (2^-14 + m 2^-24) - 2^-14, exact
 * In the other's lanes each formula is at least the value (after rounding too), so the
 * min of the two is the value: no select. Infinities and NaN (exponent 31) then get the
 * all-ones exponent, their mantissa kept.
 * No float operand is subnormal. (Multiplying em by 2^112 is exact too, but em is a
 * subnormal f32 for every f16 subnormal; WebAssembly keeps subnormals, and on an Intel
 * Xeon that made all-subnormal data 19 times slower to convert.) */
KILN_INLINE v128_t kiln_f16_to_f32(v128_t h) {
  const v128_t em = wasm_u32x4_shr(wasm_i32x4_shl(h, 17), 4);
  const v128_t sign = wasm_i32x4_shl(wasm_u32x4_shr(h, 15), 31);
  const v128_t normal = wasm_i32x4_add(em, wasm_i32x4_splat(112 << 23));
  const v128_t subnormal = wasm_f32x4_sub(wasm_i32x4_add(em, wasm_i32x4_splat(113 << 23)), wasm_f32x4_splat(0x1p-14f));
  const v128_t value = wasm_f32x4_pmin(subnormal, normal);
  const v128_t special = wasm_i32x4_gt(em, wasm_i32x4_splat(0x0f7fffff));
  return wasm_v128_or(wasm_v128_or(value, wasm_v128_and(special, wasm_i32x4_splat(0x7f800000))), sign);
}

/* f32 -> bf16 bits in the low half of each lane. */
KILN_INLINE v128_t kiln_f32_to_bf16(v128_t f) {
  const v128_t lsb = wasm_v128_and(wasm_u32x4_shr(f, 16), wasm_i32x4_splat(1));
  const v128_t rounded = wasm_u32x4_shr(wasm_i32x4_add(wasm_i32x4_add(f, wasm_i32x4_splat(0x7fff)), lsb), 16);
  const v128_t quiet = wasm_v128_or(wasm_u32x4_shr(f, 16), wasm_i32x4_splat(0x0040));
  return wasm_v128_bitselect(quiet, rounded, wasm_f32x4_ne(f, f));
}

/* f32 -> f16 bits in the low half of each lane. Three cases on |f|:
 *   >= 2^16      infinity (or NaN with the payload's top bits, quiet)
 *   <  2^-14     subnormal or zero: adding 0.5 leaves the f16 subnormal in the
 *                low mantissa bits, rounded to nearest even by the add itself
 *   otherwise    rebias the exponent and round the mantissa to 10 bits (may
 *                carry into the exponent, up to infinity) */
KILN_INLINE v128_t kiln_f32_to_f16(v128_t f) {
  const v128_t sign = wasm_v128_and(f, wasm_i32x4_splat((int32_t)0x80000000u));
  const v128_t a = wasm_v128_xor(f, sign);
  const v128_t is_nan = wasm_i32x4_gt(a, wasm_i32x4_splat(0x7f800000));
  const v128_t nan = wasm_v128_or(wasm_i32x4_splat(0x7e00), wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_splat(0x3ff)));
  const v128_t big = wasm_v128_bitselect(nan, wasm_i32x4_splat(0x7c00), is_nan);
  const v128_t half = wasm_i32x4_splat(126 << 23);
  const v128_t small = wasm_i32x4_sub(wasm_f32x4_add(a, half), half);
  const v128_t odd = wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_splat(1));
  const v128_t normal = wasm_u32x4_shr(wasm_i32x4_add(wasm_i32x4_sub(a, wasm_i32x4_splat(((127 - 15) << 23) - 0xfff)), odd), 13);
  v128_t o = wasm_v128_bitselect(small, normal, wasm_i32x4_lt(a, wasm_i32x4_splat(113 << 23)));
  o = wasm_v128_bitselect(big, o, wasm_i32x4_ge(a, wasm_i32x4_splat((127 + 16) << 23)));
  return wasm_v128_or(o, wasm_u32x4_shr(sign, 16));
}

KILN_INLINE v128_t kiln_half_to_f32(v128_t h, int dt) { return dt == KILN_DT_BF16 ? kiln_bf16_to_f32(h) : kiln_f16_to_f32(h); }
KILN_INLINE v128_t kiln_f32_to_half(v128_t f, int dt) { return dt == KILN_DT_BF16 ? kiln_f32_to_bf16(f) : kiln_f32_to_f16(f); }

/* ---- loads and stores of elements [i, i+4) / [i, i+8) of a dtype array ---- */

KILN_INLINE v128_t kiln_load4(const void* base, size_t i, int dt) {
  if (dt == KILN_DT_F32) return wasm_v128_load((const float*)base + i);
  return kiln_half_to_f32(wasm_u32x4_load16x4((const uint16_t*)base + i), dt);
}

KILN_INLINE void kiln_store4(void* base, size_t i, v128_t v, int dt) {
  if (dt == KILN_DT_F32) {
    wasm_v128_store((float*)base + i, v);
    return;
  }
  const v128_t h = kiln_f32_to_half(v, dt);
  wasm_v128_store64_lane((uint16_t*)base + i, wasm_u16x8_narrow_i32x4(h, h), 0);
}

/* Two vectors from one 16-byte load for the 16-bit dtypes. */
KILN_INLINE void kiln_load8(const void* base, size_t i, int dt, v128_t* lo, v128_t* hi) {
  if (dt == KILN_DT_F32) {
    *lo = wasm_v128_load((const float*)base + i);
    *hi = wasm_v128_load((const float*)base + i + 4);
    return;
  }
  const v128_t h = wasm_v128_load((const uint16_t*)base + i);
  if (dt == KILN_DT_BF16) {
    /* Interleaving with zeros puts each bf16 in the top half of a lane: one instruction per 4 values. */
    const v128_t zero = wasm_i32x4_splat(0);
    *lo = wasm_i16x8_shuffle(zero, h, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = wasm_i16x8_shuffle(zero, h, 4, 12, 5, 13, 6, 14, 7, 15);
    return;
  }
  *lo = kiln_f16_to_f32(wasm_u32x4_extend_low_u16x8(h));
  *hi = kiln_f16_to_f32(wasm_u32x4_extend_high_u16x8(h));
}

KILN_INLINE void kiln_store8(void* base, size_t i, v128_t lo, v128_t hi, int dt) {
  if (dt == KILN_DT_F32) {
    wasm_v128_store((float*)base + i, lo);
    wasm_v128_store((float*)base + i + 4, hi);
    return;
  }
  wasm_v128_store((uint16_t*)base + i, wasm_u16x8_narrow_i32x4(kiln_f32_to_half(lo, dt), kiln_f32_to_half(hi, dt)));
}

/* One element, through the same vector conversion. */
KILN_INLINE float kiln_load1(const void* base, size_t i, int dt) {
  if (dt == KILN_DT_F32) return ((const float*)base)[i];
  return wasm_f32x4_extract_lane(kiln_half_to_f32(wasm_i32x4_splat(((const uint16_t*)base)[i]), dt), 0);
}

KILN_INLINE void kiln_store1(void* base, size_t i, float x, int dt) {
  if (dt == KILN_DT_F32) {
    ((float*)base)[i] = x;
    return;
  }
  ((uint16_t*)base)[i] = (uint16_t)wasm_i32x4_extract_lane(kiln_f32_to_half(wasm_f32x4_splat(x), dt), 0);
}

/* Elements [i, i+count), count < 4, into the low lanes; the other lanes hold `fill`. */
KILN_INLINE v128_t kiln_load_partial(const void* base, size_t i, size_t count, int dt, float fill) {
  float lanes[4] = {fill, fill, fill, fill};
  for (size_t k = 0; k < count; k++) lanes[k] = kiln_load1(base, i + k, dt);
  return wasm_v128_load(lanes);
}

/* The low `count` lanes (count < 4) into elements [i, i+count). */
KILN_INLINE void kiln_store_partial(void* base, size_t i, v128_t v, size_t count, int dt) {
  float lanes[4];
  wasm_v128_store(lanes, v);
  for (size_t k = 0; k < count; k++) kiln_store1(base, i + k, lanes[k], dt);
}

KILN_INLINE float kiln_hsum(v128_t v) {
  return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
         (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}

KILN_INLINE float kiln_hmax(v128_t v) {
  v = wasm_f32x4_pmax(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_f32x4_pmax(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(v, 0);
}

/* ---- threads ---- */

/* Thread `thread` of `nthreads` takes [*lo, *hi) of [0, n), in chunks that are
 * whole multiples of `align` (so neighbouring threads do not share cache lines). */
KILN_INLINE void kiln_split(size_t n, size_t align, int thread, int nthreads, size_t* lo, size_t* hi) {
  size_t chunk = (n + (size_t)nthreads - 1) / (size_t)nthreads;
  chunk = (chunk + align - 1) / align * align;
  size_t start = chunk * (size_t)thread;
  *lo = start < n ? start : n;
  *hi = start + chunk < n ? start + chunk : n;
}

#endif
