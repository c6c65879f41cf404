// Packing for the native GEMM (gemm_nest.h): blocks of op(A) and op(B) copied into the
// layouts the register tile reads, 16-bit values widened to f32 on the way, zero padded to
// whole slivers so the tile never needs a bounds check:
//   Ap: sliver s holds rows s*MR .. s*MR+MR-1, p-major: Ap[s][p][r]   (MR floats a k step)
//   Bp: sliver s holds cols s*NR .. s*NR+NR-1, p-major: Bp[s][p][c]   (NR floats a k step)
// Operands stored across the order the packed layout wants (A stored (m, k), B stored
// (n, k)) are read eight (or four) stored rows by as many values at a time and transposed
// in registers (AVX on x86-64; on AArch64 four 4 x 4 NEON transposes make the 8 x 8 one).
#ifndef KILN_NATIVE_NEST_PACK_H
#define KILN_NATIVE_NEST_PACK_H

#if defined(__aarch64__)
#include <arm_neon.h>
#else
#include <immintrin.h>
#endif

#include "nest_access.h"

namespace kiln_native {
namespace {

#if defined(__aarch64__)
/*
 * Four stored rows (at, at + ld, at + 2 ld, at + 3 ld), four values each from `at`,
 * transposed: value q of every row goes to dst + q * step (four floats).
 */
template <class V, int DT>
static inline void transpose_4x4(const uint8_t* src, int64_t at, int64_t ld, float* dst, int64_t step) {
  static_assert(V::L == 4, "the NEON transposes take vectors of four lanes");
  const float32x4x2_t t01 = vtrnq_f32(vload<V, DT>(src, at), vload<V, DT>(src, at + ld));  // r0[0] r1[0] r0[2] r1[2] | r0[1] r1[1] r0[3] r1[3]
  const float32x4x2_t t23 = vtrnq_f32(vload<V, DT>(src, at + 2 * ld), vload<V, DT>(src, at + 3 * ld));
  vst1q_f32(dst, vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0])));
  vst1q_f32(dst + step, vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1])));
  vst1q_f32(dst + 2 * step, vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0])));
  vst1q_f32(dst + 3 * step, vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1])));
}

/* transpose_4x4 on eight rows by eight values: value q of every row goes to dst + q * step (eight floats). */
template <class V, int DT>
static inline void transpose_8x8(const uint8_t* src, int64_t at, int64_t ld, float* dst, int64_t step) {
  for (int r = 0; r < 8; r += 4)
    for (int q = 0; q < 8; q += 4) transpose_4x4<V, DT>(src, at + r * ld + q, ld, dst + q * step + r, step);
}
#else

/* Elements [i, i + 4) of a dtype array as four f32 lanes. */
template <class V, int DT>
static inline __m128 load4(const uint8_t* base, int64_t i) {
  if (DT == kF32) return _mm_loadu_ps((const float*)base + i);
  const __m128i h = _mm_loadl_epi64((const __m128i*)((const uint16_t*)base + i));
  if (DT == kBf16) return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16));
  return _mm_cvtph_ps(h);
}

/* Elements [i, i + 8) of a dtype array as eight f32 lanes. */
template <class V, int DT>
static inline __m256 load8(const uint8_t* base, int64_t i) {
  if (DT == kF32) return _mm256_loadu_ps((const float*)base + i);
  const __m128i h = _mm_loadu_si128((const __m128i*)((const uint16_t*)base + i));
  if (DT == kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}

/*
 * Eight stored rows (at, at + ld, ..., at + 7 ld), eight values each from `at`, transposed:
 * value q of every row goes to dst + q * step (eight floats).
 */
template <class V, int DT>
static inline void transpose_8x8(const uint8_t* src, int64_t at, int64_t ld, float* dst, int64_t step) {
  __m256 r[8];
  for (int i = 0; i < 8; i++) r[i] = load8<V, DT>(src, at + i * ld);
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // then fours: each 128-bit half holds one value of four rows
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int q = 0; q < 4; q++) {  // the halves of rows 0-3 and 4-7 joined
    _mm256_storeu_ps(dst + q * step, _mm256_permute2f128_ps(u[q], u[q + 4], 0x20));
    _mm256_storeu_ps(dst + (q + 4) * step, _mm256_permute2f128_ps(u[q], u[q + 4], 0x31));
  }
}

/*
 * Four stored rows (at, at + ld, at + 2 ld, at + 3 ld), four values each from `at`,
 * transposed: value q of every row goes to dst + q * step (four floats).
 */
template <class V, int DT>
static inline void transpose_4x4(const uint8_t* src, int64_t at, int64_t ld, float* dst, int64_t step) {
  __m128 r0 = load4<V, DT>(src, at), r1 = load4<V, DT>(src, at + ld);
  __m128 r2 = load4<V, DT>(src, at + 2 * ld), r3 = load4<V, DT>(src, at + 3 * ld);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(dst, r0);
  _mm_storeu_ps(dst + step, r1);
  _mm_storeu_ps(dst + 2 * step, r2);
  _mm_storeu_ps(dst + 3 * step, r3);
}
#endif

/*
 * `width` stored rows starting at row0 (ld apart), values p0 .. p0+kc of each, into the
 * p-major sliver dst (`stride` floats a k step): dst[p * stride + r] = row r's value p0 + p.
 * Rows width .. stride-1 are zero.
 */
template <class V, int DT>
static inline void pack_rows_transposed(const uint8_t* src, int64_t row0, int64_t ld, int width, int64_t p0, int kc,
                                        float* dst, int stride) {
  const int eights = width / 8 * 8, whole = width / 4 * 4;
  int p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int r = 0; r < eights; r += 8) transpose_8x8<V, DT>(src, row0 + r * ld + p0 + p, ld, dst + (int64_t)p * stride + r, stride);
    for (int r = eights; r < whole; r += 4) {
      transpose_4x4<V, DT>(src, row0 + r * ld + p0 + p, ld, dst + (int64_t)p * stride + r, stride);
      transpose_4x4<V, DT>(src, row0 + r * ld + p0 + p + 4, ld, dst + (int64_t)(p + 4) * stride + r, stride);
    }
  }
  for (; p + 4 <= kc; p += 4) {
    for (int r = 0; r < whole; r += 4) transpose_4x4<V, DT>(src, row0 + r * ld + p0 + p, ld, dst + (int64_t)p * stride + r, stride);
  }
  for (; p < kc; p++)
    for (int r = 0; r < whole; r++) dst[(int64_t)p * stride + r] = load1<V, DT>(src, row0 + r * ld + p0 + p);
  for (int r = whole; r < width; r++)
    for (int q = 0; q < kc; q++) dst[(int64_t)q * stride + r] = load1<V, DT>(src, row0 + r * ld + p0 + q);
  for (int r = width; r < stride; r++)
    for (int q = 0; q < kc; q++) dst[(int64_t)q * stride + r] = 0.0f;
}

/* Ap[s][p][r] = op(A)(i0 + s*MR + r, p0 + p), zero past row mc. */
template <class V, int DT>
static inline void pack_a(const uint8_t* a, int64_t lda, bool trans_a, int i0, int mc, int p0, int kc, float* ap) {
  constexpr int MR = V::MR;
  if (trans_a) {
    /* A stored (k, m): one k step of the block is a contiguous stored row, read once across the slivers. */
    int64_t at = (int64_t)p0 * lda + i0;
    for (int p = 0; p < kc; p++, at += lda)
      for (int s = 0; s < mc; s += MR)
        for (int v = 0; v < MR; v += V::L) { /* one vector when MR <= L */
          const int rows = imin(MR, mc - s) - v;
          V::store_n(ap + (int64_t)s * kc + (int64_t)p * MR + v, rows > 0 ? vload_n<V, DT>(a, at + s + v, rows) : V::zero(), imin(V::L, MR - v));
        }
    return;
  }
  for (int s = 0; s < mc; s += MR) pack_rows_transposed<V, DT>(a, (int64_t)(i0 + s) * lda, lda, imin(MR, mc - s), p0, kc, ap + (int64_t)s * kc, MR);
}

/* Bp[s][p][c] = op(B)(p0 + p, j0 + s*NR + c), zero past column nc. */
template <class V, int DT>
static inline void pack_b(const uint8_t* b, int64_t ldb, bool trans_b, int p0, int kc, int j0, int nc, float* bp) {
  constexpr int NR = V::NRV * V::L;
  if (trans_b) {
    /* B stored (n, k): column j of op(B) is the contiguous stored row j. */
    for (int s = 0; s < nc; s += NR) pack_rows_transposed<V, DT>(b, (int64_t)(j0 + s) * ldb, ldb, imin(NR, nc - s), p0, kc, bp + (int64_t)s * kc, NR);
    return;
  }
  /* B stored (k, n): one k step of the panel is a contiguous stored row, read once across the slivers. */
  int64_t at = (int64_t)p0 * ldb + j0;
  for (int p = 0; p < kc; p++, at += ldb) {
    for (int s = 0; s < nc; s += NR) {
      float* dst = bp + (int64_t)s * kc + (int64_t)p * NR;
      for (int v = 0; v < V::NRV; v++) {
        const int n = nc - s - v * V::L;
        V::store(dst + v * V::L, n > 0 ? vload_n<V, DT>(b, at + s + v * V::L, n) : V::zero());
      }
    }
  }
}

}  // namespace
}  // namespace kiln_native

#endif
