/*
 * Storage dtypes of the matmul family, read into f32x4 lanes and written back.
 *
 *   MM_F32  0  4 bytes, IEEE binary32
 *   MM_BF16 1  2 bytes, the top half of an f32 (1 sign, 8 exponent, 7 mantissa)
 *   MM_F16  2  2 bytes, IEEE binary16 (1 sign, 5 exponent, 10 mantissa, bias 15)
 *
 * 16-bit to f32 is exact. f32 to 16-bit rounds to nearest, ties to even;
 * overflow goes to infinity; NaN stays a quiet NaN keeping its sign and top
 * payload bits; f16 keeps subnormals. Bit-exact with packages/contract/src/half.ts.
 *
 * An array is addressed by (base, element index, dtype). Every helper takes
 * the dtype as an argument: called with a constant it inlines to that dtype's
 * code alone. The _n variants touch only the first n (1..4) elements, so they
 * never read or write past the end of an operand.
 */
#ifndef KILN_MATMUL_DTYPE_H
#define KILN_MATMUL_DTYPE_H

#include "kiln_simd.h"

#define MM_F32 0
#define MM_BF16 1
#define MM_F16 2

/* ---- 16-bit patterns (one per u32 lane) <-> f32 lanes ------------------- */

KILN_INLINE v128_t mm_bf16_to_f32(v128_t h) { return wasm_i32x4_shl(h, 16); }

/* Exponent and mantissa move up 13 bits, where, read as an f32, they are the
 * value times 2^-112 (exactly, subnormals included): multiply by 2^112.
 * Infinities and NaN (exponent 31) then get the all-ones exponent. */
KILN_INLINE v128_t mm_f16_to_f32(v128_t h) {
  const v128_t em = wasm_u32x4_shr(wasm_i32x4_shl(h, 17), 4);
  const v128_t sign = wasm_i32x4_shl(wasm_u32x4_shr(h, 15), 31);
  const v128_t value = wasm_f32x4_mul(em, wasm_f32x4_splat(0x1p112f));
  const v128_t special = wasm_i32x4_gt(em, wasm_i32x4_splat(0x0f7fffff));
  return wasm_v128_or(wasm_v128_or(value, wasm_v128_and(special, wasm_i32x4_splat(0x7f800000))), sign);
}

/* Round to nearest even by adding 0x7fff plus the kept lsb; NaN: keep the top half, set the quiet bit. */
KILN_INLINE v128_t mm_f32_to_bf16(v128_t f) {
  const v128_t top = wasm_u32x4_shr(f, 16);
  const v128_t lsb = wasm_v128_and(top, wasm_i32x4_splat(1));
  const v128_t rounded = wasm_u32x4_shr(wasm_i32x4_add(f, wasm_i32x4_add(lsb, wasm_i32x4_splat(0x7fff))), 16);
  const v128_t nan = wasm_v128_or(top, wasm_i32x4_splat(0x0040));
  return wasm_v128_bitselect(nan, rounded, wasm_f32x4_ne(f, f));
}

/* On |f|'s bits a:
 *   a >  inf           NaN: quiet bit plus the top 9 mantissa bits
 *   a >= 2^16          infinity (65520 <= |f| < 2^16 also gets there by rounding below)
 *   a <  2^-14         subnormal or zero: |f| + 0.5 leaves |f| / 2^-24 rounded to nearest
 *                      even in the low mantissa bits (0.5's ulp is 2^-24)
 *   otherwise          rebias (-112) and round the mantissa to 10 bits; a carry moves
 *                      into the exponent, up to infinity */
KILN_INLINE v128_t mm_f32_to_f16(v128_t f) {
  const v128_t sign = wasm_v128_and(f, wasm_i32x4_splat((int32_t)0x80000000u));
  const v128_t a = wasm_v128_xor(f, sign);
  const v128_t odd = wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_splat(1));
  const v128_t normal =
      wasm_u32x4_shr(wasm_i32x4_add(wasm_i32x4_sub(a, wasm_i32x4_splat((112 << 23) - 0xfff)), odd), 13);
  const v128_t half = wasm_f32x4_splat(0.5f);
  const v128_t tiny = wasm_i32x4_sub(wasm_f32x4_add(a, half), half);
  const v128_t nan = wasm_v128_or(wasm_i32x4_splat(0x7e00), wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_splat(0x1ff)));
  const v128_t special = wasm_v128_bitselect(nan, wasm_i32x4_splat(0x7c00), wasm_i32x4_gt(a, wasm_i32x4_splat(0x7f800000)));
  v128_t o = wasm_v128_bitselect(tiny, normal, wasm_i32x4_lt(a, wasm_i32x4_splat(113 << 23)));
  o = wasm_v128_bitselect(special, o, wasm_i32x4_ge(a, wasm_i32x4_splat(143 << 23)));
  return wasm_v128_or(o, wasm_u32x4_shr(sign, 16));
}

KILN_INLINE v128_t mm_bits_to_f32(v128_t h, int dt) { return dt == MM_BF16 ? mm_bf16_to_f32(h) : mm_f16_to_f32(h); }
KILN_INLINE v128_t mm_f32_to_bits(v128_t f, int dt) { return dt == MM_BF16 ? mm_f32_to_bf16(f) : mm_f32_to_f16(f); }

/* fn(args..., dt, ct) with both dtypes as constants, for the pairs that exist: (f32, f32),
 * (bf16, bf16 or f32), (f16, f16 or f32); ct is the output's dtype. */
#define MM_CALL_WITH_DTYPES(dt, ct, fn, ...)                                             \
  do {                                                                                   \
    if ((dt) == MM_F32) fn(__VA_ARGS__, MM_F32, MM_F32);                                 \
    else if ((dt) == MM_BF16 && (ct) == MM_F32) fn(__VA_ARGS__, MM_BF16, MM_F32);        \
    else if ((dt) == MM_BF16) fn(__VA_ARGS__, MM_BF16, MM_BF16);                         \
    else if ((ct) == MM_F32) fn(__VA_ARGS__, MM_F16, MM_F32);                            \
    else fn(__VA_ARGS__, MM_F16, MM_F16);                                                \
  } while (0)

/* ---- element access --------------------------------------------------- */

#define MM_F32P(base) ((const float*)(base))
#define MM_HALFP(base) ((const uint16_t*)(base))

/* Address of element i. */
KILN_INLINE const void* mm_at(const void* base, size_t i, int dt) {
  return dt == MM_F32 ? (const void*)(MM_F32P(base) + i) : (const void*)(MM_HALFP(base) + i);
}
KILN_INLINE void* mm_at_mut(void* base, size_t i, int dt) { return (void*)mm_at(base, i, dt); }

/* Elements [i, i+4). */
KILN_INLINE v128_t mm_load4(const void* base, size_t i, int dt) {
  if (dt == MM_F32) return wasm_v128_load(MM_F32P(base) + i);
  return mm_bits_to_f32(wasm_u32x4_load16x4(MM_HALFP(base) + i), dt);
}

/* Elements [i, i+8) as two vectors (one 16-byte load for the 16-bit dtypes). */
KILN_INLINE void mm_load8(const void* base, size_t i, int dt, v128_t* lo, v128_t* hi) {
  if (dt == MM_F32) {
    *lo = wasm_v128_load(MM_F32P(base) + i);
    *hi = wasm_v128_load(MM_F32P(base) + i + 4);
    return;
  }
  const v128_t h = wasm_v128_load(MM_HALFP(base) + i);
  if (dt == MM_BF16) {
    /* Interleaving with zeros puts each bf16 in the top half of a lane: one instruction per 4 values. */
    const v128_t zero = wasm_i32x4_splat(0);
    *lo = wasm_i16x8_shuffle(zero, h, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = wasm_i16x8_shuffle(zero, h, 4, 12, 5, 13, 6, 14, 7, 15);
    return;
  }
  *lo = mm_f16_to_f32(wasm_u32x4_extend_low_u16x8(h));
  *hi = mm_f16_to_f32(wasm_u32x4_extend_high_u16x8(h));
}

/* Elements [i, i+n), n in 1..4, reading only those; lanes n.. are 0. */
KILN_INLINE v128_t mm_load_n(const void* base, size_t i, int n, int dt) {
  if (dt == MM_F32) {
    const float* p = MM_F32P(base) + i;
    v128_t x = wasm_f32x4_make(p[0], 0.0f, 0.0f, 0.0f);
    if (n > 1) x = wasm_f32x4_replace_lane(x, 1, p[1]);
    if (n > 2) x = wasm_f32x4_replace_lane(x, 2, p[2]);
    if (n > 3) x = wasm_f32x4_replace_lane(x, 3, p[3]);
    return x;
  }
  const uint16_t* p = MM_HALFP(base) + i;
  v128_t h = wasm_i32x4_make(p[0], 0, 0, 0);
  if (n > 1) h = wasm_i32x4_replace_lane(h, 1, p[1]);
  if (n > 2) h = wasm_i32x4_replace_lane(h, 2, p[2]);
  if (n > 3) h = wasm_i32x4_replace_lane(h, 3, p[3]);
  return mm_bits_to_f32(h, dt);
}

/* Element i. */
KILN_INLINE float mm_load1(const void* base, size_t i, int dt) {
  if (dt == MM_F32) return MM_F32P(base)[i];
  return wasm_f32x4_extract_lane(mm_bits_to_f32(wasm_i32x4_splat(MM_HALFP(base)[i]), dt), 0);
}

/* Stores lanes 0..3 to elements [i, i+4). */
KILN_INLINE void mm_store4(void* base, size_t i, v128_t x, int dt) {
  if (dt == MM_F32) {
    wasm_v128_store((float*)base + i, x);
    return;
  }
  const v128_t h = mm_f32_to_bits(x, dt);
  wasm_v128_store64_lane((uint16_t*)base + i, wasm_u16x8_narrow_i32x4(h, h), 0);
}

/* Stores lanes 0..n-1 (n in 1..4) to elements [i, i+n), writing nothing else. */
KILN_INLINE void mm_store_n(void* base, size_t i, v128_t x, int n, int dt) {
  if (dt == MM_F32) {
    float* p = (float*)base + i;
    p[0] = wasm_f32x4_extract_lane(x, 0);
    if (n > 1) p[1] = wasm_f32x4_extract_lane(x, 1);
    if (n > 2) p[2] = wasm_f32x4_extract_lane(x, 2);
    if (n > 3) p[3] = wasm_f32x4_extract_lane(x, 3);
    return;
  }
  const v128_t h = mm_f32_to_bits(x, dt);
  uint16_t* p = (uint16_t*)base + i;
  p[0] = (uint16_t)wasm_i32x4_extract_lane(h, 0);
  if (n > 1) p[1] = (uint16_t)wasm_i32x4_extract_lane(h, 1);
  if (n > 2) p[2] = (uint16_t)wasm_i32x4_extract_lane(h, 2);
  if (n > 3) p[3] = (uint16_t)wasm_i32x4_extract_lane(h, 3);
}

/* Element i. */
KILN_INLINE void mm_store1(void* base, size_t i, float x, int dt) {
  if (dt == MM_F32) {
    ((float*)base)[i] = x;
    return;
  }
  ((uint16_t*)base)[i] = (uint16_t)wasm_i32x4_extract_lane(mm_f32_to_bits(wasm_f32x4_splat(x), dt), 0);
}

#endif
