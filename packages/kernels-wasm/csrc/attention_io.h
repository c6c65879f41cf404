/*
 * Row loads and stores of the attention kernels: a row of a storage-dtype
 * array (f32, bf16, f16; the conversions of kiln_storage.h) to an f32 row
 * padded with zeros, and an f32 row times a multiplier back to the dtype.
 * Four elements at a time with f32x4, one at a time for the last n % 4.
 */
#ifndef KILN_ATTENTION_IO_H
#define KILN_ATTENTION_IO_H

#include "kiln_storage.h"

KILN_INLINE void attn_load_row_dt(const void* base, size_t index, int n, float* restrict dst, int npad, int dt) {
  int i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(dst + i, kiln_load4(base, index + (size_t)i, dt));
  for (; i < n; i++) dst[i] = kiln_load1(base, index + (size_t)i, dt);
  for (; i < npad; i++) dst[i] = 0.0f;
}

KILN_INLINE void attn_store_row_dt(void* base, size_t index, int n, const float* restrict src, float mul, int dt) {
  const v128_t m = wasm_f32x4_splat(mul);
  int i = 0;
  for (; i + 4 <= n; i += 4) kiln_store4(base, index + (size_t)i, wasm_f32x4_mul(wasm_v128_load(src + i), m), dt);
  for (; i < n; i++) kiln_store1(base, index + (size_t)i, src[i] * mul, dt);
}

/* dst[0..n) = row at element `index` of `base` as f32; dst[n..npad) = 0. */
static void attn_load_row(const void* base, size_t index, int n, int dtype, float* restrict dst, int npad) {
  if (dtype == KILN_DT_F32) attn_load_row_dt(base, index, n, dst, npad, KILN_DT_F32);
  else if (dtype == KILN_DT_BF16) attn_load_row_dt(base, index, n, dst, npad, KILN_DT_BF16);
  else attn_load_row_dt(base, index, n, dst, npad, KILN_DT_F16);
}

/* Row at element `index` of `base` = mul * src[0..n), rounded to the storage dtype. */
static void attn_store_row(void* base, size_t index, int n, int dtype, const float* restrict src, float mul) {
  if (dtype == KILN_DT_F32) attn_store_row_dt(base, index, n, src, mul, KILN_DT_F32);
  else if (dtype == KILN_DT_BF16) attn_store_row_dt(base, index, n, src, mul, KILN_DT_BF16);
  else attn_store_row_dt(base, index, n, src, mul, KILN_DT_F16);
}

#endif
