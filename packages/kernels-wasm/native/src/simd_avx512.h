// f32 vectors of 16 lanes (AVX-512F, with F16C and FMA): the operations gemm_nest.h is
// written in, for gemm_avx512.cc only (compiled with -mavx512f -mfma -mf16c).
//
// 16-bit conversions, bit for bit those of the WebAssembly kernels (csrc/kiln_storage.h):
//   bf16 -> f32  a shift; f16 -> f32  vcvtph2ps (exact)
//   f32 -> bf16 / f16  round to nearest even, NaN kept quiet with its sign and top payload
//   bits, overflow to infinity, f16 subnormals; the same integer steps as kiln_storage.h.
#ifndef KILN_NATIVE_SIMD_AVX512_H
#define KILN_NATIVE_SIMD_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "matmul_call.h"

namespace kiln_native {
namespace {

struct Avx512 {
  using vec = __m512;
  static constexpr int L = 16;   // lanes
  static constexpr int MR = 12;  // register tile: MR rows x NRV vectors = 24 accumulators of 32
  static constexpr int NRV = 2;
  static constexpr int CHAINS = 16;  // of the FMA ceiling loop, with its two constants: 18 of 32 registers
  static constexpr const char* name = "avx512";

  static inline vec zero() { return _mm512_setzero_ps(); }
  static inline vec splat(float x) { return _mm512_set1_ps(x); }
  static inline vec load(const float* p) { return _mm512_loadu_ps(p); }
  static inline void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static inline __mmask16 first(int n) { return (__mmask16)((1u << n) - 1u); }
  /* Lanes [0, n) from p (n < 16), nothing read past them; the others 0. */
  static inline vec load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static inline void store_n(float* p, vec v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
  static inline vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c, one rounding
  static inline vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static inline vec add(vec a, vec b) { return _mm512_add_ps(a, b); }

  static inline vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  /* max(a, b); a NaN in b is kept (the second operand wins when either is NaN). */
  static inline vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static inline float hsum(vec v) { return _mm512_reduce_add_ps(v); }
  static inline float hmax(vec v) { return _mm512_reduce_max_ps(v); }
  /* Lanes [from, to) of x, the others `fill` (from and to may lie outside 0..16). */
  static inline vec keep(vec x, int from, int to, vec fill) {
    const int f = from < 0 ? 0 : from > 16 ? 16 : from, t = to < 0 ? 0 : to > 16 ? 16 : to;
    return _mm512_mask_blend_ps((__mmask16)(first(t) & ~first(f)), fill, x);
  }
  static inline vec min(vec a, vec b) { return _mm512_min_ps(a, b); }
  static inline vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  static inline vec round(vec x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  /* 2^n for whole n in [-127, 127] (2^-127 as 0). */
  static inline vec pow2(vec n) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23)); }
  /* -|x| */
  static inline vec neg_abs(vec x) { return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int32_t)0x80000000u))); }
  /* a where x < 0, else b */
  static inline vec where_negative(vec x, vec a, vec b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero(), _CMP_LT_OQ), b, a); }

  /* 16 values of dtype dt (bf16 or f16) at p, in f32. */
  static inline vec widen(const uint16_t* p, int dt) {
    const __m256i h = _mm256_loadu_si256((const __m256i*)p);
    if (dt == kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
  }

  static inline __m512i to_bf16_bits(vec v) {
    const __m512i f = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(f, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(0x0040));
    return _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, quiet);
  }

  /* kiln_f32_to_f16's three cases on |f|: >= 2^16 infinity or NaN; < 2^-14 subnormal or zero
   * (adding 0.5 rounds the f16 subnormal into the low bits); else rebias and round. */
  static inline __m512i to_f16_bits(vec v) {
    const __m512i f = _mm512_castps_si512(v);
    const __m512i sign = _mm512_and_si512(f, _mm512_set1_epi32((int32_t)0x80000000u));
    const __m512i a = _mm512_xor_si512(f, sign);
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f800000));
    const __m512i nan = _mm512_or_si512(_mm512_set1_epi32(0x7e00), _mm512_and_si512(_mm512_srli_epi32(a, 13), _mm512_set1_epi32(0x3ff)));
    const __m512i big = _mm512_mask_blend_epi32(is_nan, _mm512_set1_epi32(0x7c00), nan);
    const __m512i half = _mm512_set1_epi32(126 << 23);
    const __m512i small = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(half))), half);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 13), _mm512_set1_epi32(1));
    const __m512i normal = _mm512_srli_epi32(_mm512_add_epi32(_mm512_sub_epi32(a, _mm512_set1_epi32(((127 - 15) << 23) - 0xfff)), odd), 13);
    __m512i o = _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(113 << 23)), normal, small);
    o = _mm512_mask_blend_epi32(_mm512_cmpge_epi32_mask(a, _mm512_set1_epi32((127 + 16) << 23)), o, big);
    return _mm512_or_si512(o, _mm512_srli_epi32(sign, 16));
  }

  /* 16 values rounded once to dtype dt (bf16 or f16), stored at p. */
  static inline void narrow(uint16_t* p, vec v, int dt) {
    const __m512i bits = dt == kBf16 ? to_bf16_bits(v) : to_f16_bits(v);
    _mm256_storeu_si256((__m256i*)p, _mm512_cvtepi32_epi16(bits));
  }

  /* A fused multiply-add of one lane's values, rounded as a vector lane is. */
  static inline float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
  }
  static inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
};

}  // namespace
}  // namespace kiln_native

#endif
