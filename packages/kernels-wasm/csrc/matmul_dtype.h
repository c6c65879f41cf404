/*
 * What the matmul family adds to kiln_storage.h (the dtype codes, conversions
 * and loads / stores of whole vectors): dispatch on the (A/B, C) dtype pair,
 * element addresses, and loads and stores of the first n (1..4) elements that
 * never read or write past the end of an operand.
 *
 * An array is addressed by (base, element index, dtype). Every helper takes
 * the dtype as an argument: called with a constant it inlines to that dtype's
 * code alone.
 */
#ifndef KILN_MATMUL_DTYPE_H
#define KILN_MATMUL_DTYPE_H

#include "kiln_storage.h"

/* fn(args..., dt, ct) with both dtypes as constants, for the pairs that exist: (f32, f32),
 * (bf16, bf16 or f32), (f16, f16 or f32); ct is the output's dtype. */
#define MM_CALL_WITH_DTYPES(dt, ct, fn, ...)                                                          \
  do {                                                                                                \
    if ((dt) == KILN_DT_F32) fn(__VA_ARGS__, KILN_DT_F32, KILN_DT_F32);                               \
    else if ((dt) == KILN_DT_BF16 && (ct) == KILN_DT_F32) fn(__VA_ARGS__, KILN_DT_BF16, KILN_DT_F32); \
    else if ((dt) == KILN_DT_BF16) fn(__VA_ARGS__, KILN_DT_BF16, KILN_DT_BF16);                       \
    else if ((ct) == KILN_DT_F32) fn(__VA_ARGS__, KILN_DT_F16, KILN_DT_F32);                          \
    else fn(__VA_ARGS__, KILN_DT_F16, KILN_DT_F16);                                                   \
  } while (0)

/* ---- element access --------------------------------------------------- */

#define MM_F32P(base) ((const float*)(base))
#define MM_HALFP(base) ((const uint16_t*)(base))

/* Address of element i. */
KILN_INLINE const void* mm_at(const void* base, size_t i, int dt) {
  return dt == KILN_DT_F32 ? (const void*)(MM_F32P(base) + i) : (const void*)(MM_HALFP(base) + i);
}
KILN_INLINE void* mm_at_mut(void* base, size_t i, int dt) { return (void*)mm_at(base, i, dt); }

/* Elements [i, i+n), n in 1..4, reading only those; lanes n.. are 0. */
KILN_INLINE v128_t mm_load_n(const void* base, size_t i, int n, int dt) {
  if (dt == KILN_DT_F32) {
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
  return kiln_half_to_f32(h, dt);
}

/* Stores lanes 0..n-1 (n in 1..4) to elements [i, i+n), writing nothing else. */
KILN_INLINE void mm_store_n(void* base, size_t i, v128_t x, int n, int dt) {
  if (dt == KILN_DT_F32) {
    float* p = (float*)base + i;
    p[0] = wasm_f32x4_extract_lane(x, 0);
    if (n > 1) p[1] = wasm_f32x4_extract_lane(x, 1);
    if (n > 2) p[2] = wasm_f32x4_extract_lane(x, 2);
    if (n > 3) p[3] = wasm_f32x4_extract_lane(x, 3);
    return;
  }
  const v128_t h = kiln_f32_to_half(x, dt);
  uint16_t* p = (uint16_t*)base + i;
  p[0] = (uint16_t)wasm_i32x4_extract_lane(h, 0);
  if (n > 1) p[1] = (uint16_t)wasm_i32x4_extract_lane(h, 1);
  if (n > 2) p[2] = (uint16_t)wasm_i32x4_extract_lane(h, 2);
  if (n > 3) p[3] = (uint16_t)wasm_i32x4_extract_lane(h, 3);
}

#endif
