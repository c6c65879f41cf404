/*
 * Row loads and stores between the storage dtypes (f32, bf16, f16) and f32,
 * for the attention kernels.
 *
 *   bf16 -> f32: the 16 bits become the top half of the f32 (exact).
 *   f16  -> f32: exact, subnormals included; inf and NaN kept.
 *   f32  -> bf16: round to nearest even; NaN stays NaN (quiet, sign kept).
 *   f32  -> f16: round to nearest even, subnormals kept, overflow to inf;
 *                NaN -> sign | 0x7e00 | (mantissa >> 13).
 * Four elements at a time with f32x4, scalar for the last n % 4.
 */
#ifndef KILN_ATTENTION_IO_H
#define KILN_ATTENTION_IO_H

#include "kiln_simd.h"

enum { ATTN_F32 = 0, ATTN_BF16 = 1, ATTN_F16 = 2 };

KILN_INLINE uint32_t attn_f32_bits(float x) {
  union { float f; uint32_t u; } v = { .f = x };
  return v.u;
}

KILN_INLINE float attn_bits_f32(uint32_t u) {
  union { uint32_t u; float f; } v = { .u = u };
  return v.f;
}

/* ---- to f32 ----------------------------------------------------------- */

KILN_INLINE float attn_bf16_to_f32(uint16_t h) { return attn_bits_f32((uint32_t)h << 16); }

KILN_INLINE float attn_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  const uint32_t em = h & 0x7fff;
  if (em >= 0x7c00) return attn_bits_f32(sign | 0x7f800000 | (em << 13));
  /* Normal and subnormal halves alike: place the bits in an f32 and rescale by 2^112 (exact). */
  return attn_bits_f32(sign | attn_f32_bits(attn_bits_f32(em << 13) * 0x1p112f));
}

KILN_INLINE v128_t attn_bf16x4_to_f32(const uint16_t* p) { return wasm_i32x4_shl(wasm_u32x4_load16x4(p), 16); }

KILN_INLINE v128_t attn_f16x4_to_f32(const uint16_t* p) {
  const v128_t h = wasm_u32x4_load16x4(p);
  const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
  const v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7fff));
  const v128_t shifted = wasm_i32x4_shl(em, 13);
  const v128_t finite = wasm_f32x4_mul(shifted, wasm_f32x4_splat(0x1p112f));
  const v128_t special = wasm_v128_or(shifted, wasm_i32x4_splat(0x7f800000));
  const v128_t is_special = wasm_i32x4_ge(em, wasm_i32x4_splat(0x7c00));
  return wasm_v128_or(sign, wasm_v128_bitselect(special, finite, is_special));
}

/* ---- from f32 --------------------------------------------------------- */

KILN_INLINE uint16_t attn_f32_to_bf16(float x) {
  const uint32_t bits = attn_f32_bits(x);
  if ((bits & 0x7f800000) == 0x7f800000 && (bits & 0x007fffff) != 0) return (uint16_t)((bits >> 16) | 0x0040);
  return (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/*
 * Round to nearest even through the f32 adder: scaling |x| by 2^112 then
 * 2^-110 saturates overflow to inf, and adding a power of two chosen from
 * x's exponent leaves exactly the bits f16 keeps (subnormals included).
 */
KILN_INLINE uint16_t attn_f32_to_f16(float x) {
  const uint32_t w = attn_f32_bits(x);
  const uint32_t shl1 = w + w;
  const uint32_t sign = (w >> 16) & 0x8000;
  if (shl1 > 0xff000000u) return (uint16_t)(sign | 0x7e00 | ((w & 0x7fffff) >> 13));
  float base = (__builtin_fabsf(x) * 0x1p112f) * 0x1p-110f;
  uint32_t bias = shl1 & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = attn_bits_f32((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = attn_f32_bits(base);
  return (uint16_t)(sign | (((bits >> 13) & 0x7c00) + (bits & 0x0fff)));
}

KILN_INLINE v128_t attn_f32x4_to_bf16_bits(v128_t x) {
  const v128_t high = wasm_u32x4_shr(x, 16);
  const v128_t rounded = wasm_u32x4_shr(
      wasm_i32x4_add(x, wasm_i32x4_add(wasm_i32x4_splat(0x7fff), wasm_v128_and(high, wasm_i32x4_splat(1)))), 16);
  const v128_t nan = wasm_v128_or(high, wasm_i32x4_splat(0x40));
  return wasm_v128_bitselect(nan, rounded, wasm_f32x4_ne(x, x));
}

KILN_INLINE v128_t attn_f32x4_to_f16_bits(v128_t x) {
  const v128_t shl1 = wasm_i32x4_add(x, x);
  const v128_t sign = wasm_v128_and(wasm_u32x4_shr(x, 16), wasm_i32x4_splat(0x8000));
  v128_t base = wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_abs(x), wasm_f32x4_splat(0x1p112f)), wasm_f32x4_splat(0x1p-110f));
  const v128_t bias = wasm_u32x4_max(wasm_v128_and(shl1, wasm_i32x4_splat((int32_t)0xff000000u)), wasm_i32x4_splat(0x71000000));
  base = wasm_f32x4_add(wasm_i32x4_add(wasm_u32x4_shr(bias, 1), wasm_i32x4_splat(0x07800000)), base);
  const v128_t finite = wasm_i32x4_add(wasm_v128_and(wasm_u32x4_shr(base, 13), wasm_i32x4_splat(0x7c00)),
                                       wasm_v128_and(base, wasm_i32x4_splat(0x0fff)));
  const v128_t nan = wasm_v128_or(wasm_i32x4_splat(0x7e00), wasm_u32x4_shr(wasm_v128_and(x, wasm_i32x4_splat(0x7fffff)), 13));
  const v128_t is_nan = wasm_u32x4_gt(shl1, wasm_i32x4_splat((int32_t)0xff000000u));
  return wasm_v128_or(sign, wasm_v128_bitselect(nan, finite, is_nan));
}

/* ---- rows --------------------------------------------------------------- */

/* dst[0..n) = row at element `index` of `base` as f32; dst[n..npad) = 0. */
static void attn_load_row(const void* base, size_t index, int n, int dtype, float* restrict dst, int npad) {
  int i = 0;
  if (dtype == ATTN_F32) {
    const float* src = (const float*)base + index;
    for (; i + 4 <= n; i += 4) wasm_v128_store(dst + i, wasm_v128_load(src + i));
    for (; i < n; i++) dst[i] = src[i];
  } else if (dtype == ATTN_BF16) {
    const uint16_t* src = (const uint16_t*)base + index;
    for (; i + 4 <= n; i += 4) wasm_v128_store(dst + i, attn_bf16x4_to_f32(src + i));
    for (; i < n; i++) dst[i] = attn_bf16_to_f32(src[i]);
  } else {
    const uint16_t* src = (const uint16_t*)base + index;
    for (; i + 4 <= n; i += 4) wasm_v128_store(dst + i, attn_f16x4_to_f32(src + i));
    for (; i < n; i++) dst[i] = attn_f16_to_f32(src[i]);
  }
  for (; i < npad; i++) dst[i] = 0.0f;
}

/* Row at element `index` of `base` = mul * src[0..n), rounded to the storage dtype. */
static void attn_store_row(void* base, size_t index, int n, int dtype, const float* restrict src, float mul) {
  const v128_t m = wasm_f32x4_splat(mul);
  int i = 0;
  if (dtype == ATTN_F32) {
    float* dst = (float*)base + index;
    for (; i + 4 <= n; i += 4) wasm_v128_store(dst + i, wasm_f32x4_mul(wasm_v128_load(src + i), m));
    for (; i < n; i++) dst[i] = src[i] * mul;
  } else if (dtype == ATTN_BF16) {
    uint16_t* dst = (uint16_t*)base + index;
    for (; i + 4 <= n; i += 4) {
      const v128_t h = attn_f32x4_to_bf16_bits(wasm_f32x4_mul(wasm_v128_load(src + i), m));
      wasm_v128_store64_lane(dst + i, wasm_u16x8_narrow_i32x4(h, h), 0);
    }
    for (; i < n; i++) dst[i] = attn_f32_to_bf16(src[i] * mul);
  } else {
    uint16_t* dst = (uint16_t*)base + index;
    for (; i + 4 <= n; i += 4) {
      const v128_t h = attn_f32x4_to_f16_bits(wasm_f32x4_mul(wasm_v128_load(src + i), m));
      wasm_v128_store64_lane(dst + i, wasm_u16x8_narrow_i32x4(h, h), 0);
    }
    for (; i < n; i++) dst[i] = attn_f32_to_f16(src[i] * mul);
  }
}

#endif
