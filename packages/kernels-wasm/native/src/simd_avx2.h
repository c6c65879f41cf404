// f32 vectors of 8 lanes (AVX2 with FMA and F16C): the operations gemm_nest.h is written
// in, for gemm_avx2.cc only (compiled with -mavx2 -mfma -mf16c). The conversions are those
// of simd_avx512.h on 8 lanes, bit for bit those of csrc/kiln_storage.h.
#ifndef KILN_NATIVE_SIMD_AVX2_H
#define KILN_NATIVE_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "matmul_call.h"

namespace kiln_native {
namespace {

struct Avx2 {
  using vec = __m256;
  static constexpr int L = 8;   // lanes
  static constexpr int MR = 6;  // register tile: MR rows x NRV vectors = 12 accumulators of 16
  static constexpr int NRV = 2;
  static constexpr int CHAINS = 12;  // of the FMA ceiling loop, with its two constants: 14 of 16 registers
  static constexpr const char* name = "avx2";

  static inline vec zero() { return _mm256_setzero_ps(); }
  static inline vec splat(float x) { return _mm256_set1_ps(x); }
  static inline vec load(const float* p) { return _mm256_loadu_ps(p); }
  static inline void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static inline __m256i first(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
  /* Lanes [0, n) from p (n < 8), nothing read past them; the others 0. */
  static inline vec load_n(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
  static inline void store_n(float* p, vec v, int n) { _mm256_maskstore_ps(p, first(n), v); }
  static inline vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c, one rounding
  static inline vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static inline vec add(vec a, vec b) { return _mm256_add_ps(a, b); }

  static inline vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  /* max(a, b); a NaN in b is kept (the second operand wins when either is NaN). */
  static inline vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  static inline float hsum(vec v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_shuffle_ps(x, x, 1)));
  }
  static inline float hmax(vec v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_shuffle_ps(x, x, 1)));
  }
  /* Lanes [from, to) of x, the others `fill`. */
  static inline vec keep(vec x, int from, int to, vec fill) {
    const __m256i m = _mm256_andnot_si256(first(from), first(to));
    return _mm256_blendv_ps(fill, x, _mm256_castsi256_ps(m));
  }
  static inline vec min(vec a, vec b) { return _mm256_min_ps(a, b); }
  static inline vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
  static inline vec round(vec x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  /* 2^n for whole n in [-127, 127] (2^-127 as 0). */
  static inline vec pow2(vec n) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)); }
  /* -|x| */
  static inline vec neg_abs(vec x) { return _mm256_or_ps(x, _mm256_set1_ps(-0.0f)); }
  /* a where x < 0, else b */
  static inline vec where_negative(vec x, vec a, vec b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, zero(), _CMP_LT_OQ)); }

  /* 8 values of dtype dt (bf16 or f16) at p, in f32. */
  static inline vec widen(const uint16_t* p, int dt) {
    const __m128i h = _mm_loadu_si128((const __m128i*)p);
    if (dt == kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
  }

  /* b where `mask` lanes are all ones, else a. */
  static inline __m256i select(__m256i mask, __m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, mask); }

  static inline __m256i to_bf16_bits(vec v) {
    const __m256i f = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(f, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(f, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(f, 16), _mm256_set1_epi32(0x0040));
    return select(_mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)), rounded, quiet);
  }

  static inline __m256i to_f16_bits(vec v) {
    const __m256i f = _mm256_castps_si256(v);
    const __m256i sign = _mm256_and_si256(f, _mm256_set1_epi32((int32_t)0x80000000u));
    const __m256i a = _mm256_xor_si256(f, sign);
    const __m256i is_nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
    const __m256i nan = _mm256_or_si256(_mm256_set1_epi32(0x7e00), _mm256_and_si256(_mm256_srli_epi32(a, 13), _mm256_set1_epi32(0x3ff)));
    const __m256i big = select(is_nan, _mm256_set1_epi32(0x7c00), nan);
    const __m256i half = _mm256_set1_epi32(126 << 23);
    const __m256i small = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(half))), half);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(a, 13), _mm256_set1_epi32(1));
    const __m256i normal = _mm256_srli_epi32(_mm256_add_epi32(_mm256_sub_epi32(a, _mm256_set1_epi32(((127 - 15) << 23) - 0xfff)), odd), 13);
    // a < 113 << 23: small; a >= 143 << 23 (not a < it): big.
    __m256i o = select(_mm256_cmpgt_epi32(_mm256_set1_epi32(113 << 23), a), normal, small);
    o = select(_mm256_cmpgt_epi32(_mm256_set1_epi32((127 + 16) << 23), a), big, o);
    return _mm256_or_si256(o, _mm256_srli_epi32(sign, 16));
  }

  /* 8 values rounded once to dtype dt (bf16 or f16), stored at p. */
  static inline void narrow(uint16_t* p, vec v, int dt) {
    const __m256i bits = dt == kBf16 ? to_bf16_bits(v) : to_f16_bits(v);
    // Every lane is below 2^16, so the unsigned saturation keeps it as it is.
    _mm_storeu_si128((__m128i*)p, _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1)));
  }

  static inline float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
  }
  static inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
};

}  // namespace
}  // namespace kiln_native

#endif
