/*
 * convert: dtype casts, fill, and the finiteness check.
 *
 *   cast         dst[i] = src[i] converted from src_dtype to dst_dtype
 *                (f32 / bf16 / f16 in every direction, through f32: 16-bit to
 *                f32 is exact, f32 to 16-bit rounds to nearest even, NaN stays
 *                NaN, overflow goes to infinity, f16 keeps subnormals; the
 *                same dtype on both sides is a plain copy)
 *   fill         out[i] = the bit pattern `bits` (elem_bytes 4: f32 / i32 / u32;
 *                elem_bytes 2: bf16 / f16 / u16), i < n
 *   checkFinite  *flag = 1 if any x[i] has an all-ones exponent (NaN or
 *                infinity); otherwise *flag is not written
 *
 * Arrays are contiguous; flag is one i32. Threads take contiguous chunks of
 * whole 64-byte lines (several threads may store the same 1 into flag).
 */
#include "kiln_storage.h"

typedef struct {
  const void* src;
  void* dst;
  int32_t n;
  int32_t src_dtype;
  int32_t dst_dtype;
} CastArgs;

typedef struct {
  void* out;
  int32_t n;
  int32_t elem_bytes;
  uint32_t bits;
} FillArgs;

typedef struct {
  const void* x;
  int32_t* flag;
  int32_t n;
  int32_t dtype;
} CheckFiniteArgs;

#define CHUNK_ALIGN 32

KILN_INLINE size_t elem_bytes(int dt) { return dt == KILN_DT_F32 ? 4 : 2; }

KILN_INLINE void cast_range(const void* src, void* dst, size_t lo, size_t hi, int sdt, int ddt) {
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    v128_t a, b, c, d;
    kiln_load8(src, i, sdt, &a, &b);
    kiln_load8(src, i + 8, sdt, &c, &d);
    kiln_store8(dst, i, a, b, ddt);
    kiln_store8(dst, i + 8, c, d, ddt);
  }
  for (; i < hi; i++) kiln_store1(dst, i, kiln_load1(src, i, sdt), ddt);
}

KILN_INLINE void copy_range(const void* src, void* dst, size_t lo, size_t hi, size_t bytes) {
  const uint8_t* s = (const uint8_t*)src + lo * bytes;
  uint8_t* d = (uint8_t*)dst + lo * bytes;
  size_t len = (hi - lo) * bytes, k = 0;
  for (; k + 64 <= len; k += 64) {
    const v128_t a = wasm_v128_load(s + k), b = wasm_v128_load(s + k + 16);
    const v128_t c = wasm_v128_load(s + k + 32), e = wasm_v128_load(s + k + 48);
    wasm_v128_store(d + k, a);
    wasm_v128_store(d + k + 16, b);
    wasm_v128_store(d + k + 32, c);
    wasm_v128_store(d + k + 48, e);
  }
  for (; k + 16 <= len; k += 16) wasm_v128_store(d + k, wasm_v128_load(s + k));
  for (; k < len; k++) d[k] = s[k];
}

#define CAST_TO(sdt)                                                                   \
  switch (g->dst_dtype) {                                                              \
    case KILN_DT_F32: cast_range(g->src, g->dst, lo, hi, sdt, KILN_DT_F32); break;     \
    case KILN_DT_BF16: cast_range(g->src, g->dst, lo, hi, sdt, KILN_DT_BF16); break;   \
    default: cast_range(g->src, g->dst, lo, hi, sdt, KILN_DT_F16); break;              \
  }

KILN_EXPORT(kiln_cast)
void kiln_cast(const CastArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  if (g->src_dtype == g->dst_dtype) {
    copy_range(g->src, g->dst, lo, hi, elem_bytes(g->src_dtype));
    return;
  }
  switch (g->src_dtype) {
    case KILN_DT_F32: CAST_TO(KILN_DT_F32) break;
    case KILN_DT_BF16: CAST_TO(KILN_DT_BF16) break;
    default: CAST_TO(KILN_DT_F16) break;
  }
}

KILN_EXPORT(kiln_fill)
void kiln_fill(const FillArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  const size_t bytes = (size_t)g->elem_bytes;
  const v128_t pattern = bytes == 4 ? wasm_i32x4_splat((int32_t)g->bits) : wasm_i16x8_splat((int16_t)g->bits);
  uint8_t* d = (uint8_t*)g->out + lo * bytes;
  const size_t len = (hi - lo) * bytes;
  size_t k = 0;
  for (; k + 64 <= len; k += 64) {
    wasm_v128_store(d + k, pattern);
    wasm_v128_store(d + k + 16, pattern);
    wasm_v128_store(d + k + 32, pattern);
    wasm_v128_store(d + k + 48, pattern);
  }
  for (; k + 16 <= len; k += 16) wasm_v128_store(d + k, pattern);
  if (bytes == 4) {
    for (; k < len; k += 4) *(uint32_t*)(d + k) = g->bits;
  } else {
    for (; k < len; k += 2) *(uint16_t*)(d + k) = (uint16_t)g->bits;
  }
}

/* Whether any element of [lo, hi) has an all-ones exponent: integer tests on the raw bits. */
KILN_INLINE int any_non_finite(const void* x, size_t lo, size_t hi, int dt) {
  if (dt == KILN_DT_F32) {
    const uint32_t* p = (const uint32_t*)x;
    const v128_t mask = wasm_i32x4_splat(0x7f800000);
    v128_t hit = wasm_i32x4_splat(0);
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) {
      const v128_t a = wasm_v128_and(wasm_v128_load(p + i), mask), b = wasm_v128_and(wasm_v128_load(p + i + 4), mask);
      const v128_t c = wasm_v128_and(wasm_v128_load(p + i + 8), mask), d = wasm_v128_and(wasm_v128_load(p + i + 12), mask);
      hit = wasm_v128_or(hit, wasm_v128_or(wasm_v128_or(wasm_i32x4_eq(a, mask), wasm_i32x4_eq(b, mask)),
                                           wasm_v128_or(wasm_i32x4_eq(c, mask), wasm_i32x4_eq(d, mask))));
    }
    for (; i < hi; i++) if ((p[i] & 0x7f800000u) == 0x7f800000u) return 1;
    return wasm_v128_any_true(hit);
  }
  const uint16_t* p = (const uint16_t*)x;
  const uint16_t m = dt == KILN_DT_BF16 ? 0x7f80 : 0x7c00;
  const v128_t mask = wasm_i16x8_splat((int16_t)m);
  v128_t hit = wasm_i16x8_splat(0);
  size_t i = lo;
  for (; i + 32 <= hi; i += 32) {
    const v128_t a = wasm_v128_and(wasm_v128_load(p + i), mask), b = wasm_v128_and(wasm_v128_load(p + i + 8), mask);
    const v128_t c = wasm_v128_and(wasm_v128_load(p + i + 16), mask), d = wasm_v128_and(wasm_v128_load(p + i + 24), mask);
    hit = wasm_v128_or(hit, wasm_v128_or(wasm_v128_or(wasm_i16x8_eq(a, mask), wasm_i16x8_eq(b, mask)),
                                         wasm_v128_or(wasm_i16x8_eq(c, mask), wasm_i16x8_eq(d, mask))));
  }
  for (; i < hi; i++) if ((p[i] & m) == m) return 1;
  return wasm_v128_any_true(hit);
}

KILN_EXPORT(kiln_check_finite)
void kiln_check_finite(const CheckFiniteArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  int found;
  switch (g->dtype) {
    case KILN_DT_F32: found = any_non_finite(g->x, lo, hi, KILN_DT_F32); break;
    case KILN_DT_BF16: found = any_non_finite(g->x, lo, hi, KILN_DT_BF16); break;
    default: found = any_non_finite(g->x, lo, hi, KILN_DT_F16); break;
  }
  if (found) __atomic_store_n(g->flag, 1, __ATOMIC_RELAXED);
}
