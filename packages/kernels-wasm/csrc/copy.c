/*
 * copy: copyStrided, a (batch, rows, cols) block between two strided layouts.
 *
 *   dst[b*dst_batch_stride + r*dst_row_stride + c]
 *       = (accumulate ? that element : 0) + src[b*src_batch_stride + r*src_row_stride + c]
 *
 * Strides count elements from each operand's start; a src stride may be 0 (the same
 * source row broadcast). A row of `cols` elements is contiguous on both sides. Without
 * accumulate a row moves as bytes (16-byte vectors, then bytes), so every dtype and
 * every bit pattern goes through unchanged; with it, f32x4 lanes: both rows loaded as
 * f32, added, rounded once to the dtype. The host checks that the dst rows are disjoint
 * (each dst element has one writer) and that src and dst do not overlap; threads take
 * contiguous ranges of the batch*rows rows.
 */
#include "kiln_storage.h"

/* Host-written argument block; mirrored in src/backend-copy.ts. */
typedef struct {
  const void* src;
  void* dst;
  int32_t batch, rows, cols;
  int32_t src_batch_stride, src_row_stride;
  int32_t dst_batch_stride, dst_row_stride;
  int32_t accumulate;
  int32_t dtype;
} CopyArgs;

static void copy_bytes(char* dst, const char* src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const v128_t a = wasm_v128_load(src + i), b = wasm_v128_load(src + i + 16);
    const v128_t c = wasm_v128_load(src + i + 32), d = wasm_v128_load(src + i + 48);
    wasm_v128_store(dst + i, a);
    wasm_v128_store(dst + i + 16, b);
    wasm_v128_store(dst + i + 32, c);
    wasm_v128_store(dst + i + 48, d);
  }
  for (; i + 16 <= n; i += 16) wasm_v128_store(dst + i, wasm_v128_load(src + i));
  for (; i < n; i++) dst[i] = src[i];
}

/* dst[0, n) += src[0, n) in f32, rounded once to dt. */
KILN_INLINE void add_row(void* dst, const void* src, size_t n, const int dt) {
  size_t c = 0;
  for (; c + 8 <= n; c += 8) {
    v128_t d0, d1, s0, s1;
    kiln_load8(dst, c, dt, &d0, &d1);
    kiln_load8(src, c, dt, &s0, &s1);
    kiln_store8(dst, c, wasm_f32x4_add(d0, s0), wasm_f32x4_add(d1, s1), dt);
  }
  for (; c + 4 <= n; c += 4) kiln_store4(dst, c, wasm_f32x4_add(kiln_load4(dst, c, dt), kiln_load4(src, c, dt)), dt);
  if (c < n) kiln_store_partial(dst, c, wasm_f32x4_add(kiln_load_partial(dst, c, n - c, dt, 0.0f), kiln_load_partial(src, c, n - c, dt, 0.0f)), n - c, dt);
}

KILN_INLINE void copy_rows(const CopyArgs* g, size_t i0, size_t i1, const int dt) {
  const size_t es = dt == KILN_DT_F32 ? 4 : 2;
  const size_t rows = (size_t)g->rows, cols = (size_t)g->cols;
  for (size_t i = i0; i < i1; i++) {
    const size_t b = i / rows, r = i - b * rows;
    const char* src = (const char*)g->src + (b * (size_t)g->src_batch_stride + r * (size_t)g->src_row_stride) * es;
    char* dst = (char*)g->dst + (b * (size_t)g->dst_batch_stride + r * (size_t)g->dst_row_stride) * es;
    if (g->accumulate) add_row(dst, src, cols, dt);
    else copy_bytes(dst, src, cols * es);
  }
}

KILN_EXPORT(kiln_copy_strided)
void kiln_copy_strided(const CopyArgs* g, int thread, int nthreads) {
  size_t i0, i1;
  kiln_split((size_t)g->batch * (size_t)g->rows, 1, thread, nthreads, &i0, &i1);
  switch (g->dtype) {
    case KILN_DT_F32: copy_rows(g, i0, i1, KILN_DT_F32); break;
    case KILN_DT_BF16: copy_rows(g, i0, i1, KILN_DT_BF16); break;
    default: copy_rows(g, i0, i1, KILN_DT_F16); break;
  }
}
