// 2^x and e^x on any instruction set's vectors V (simd_avx512.h, simd_avx2.h,
// simd_neon.h), for the native attention and activations: x = n + f (n the nearest
// integer, |f| <= 1/2, or for e^x, x = n ln 2 + r with ln 2 in two parts, |r| <= ln2 / 2),
// the Taylor series of 2^f or e^r by Horner's rule in fused multiply-adds (degree 7:
// truncation below 1e-8 relative), times 2^n through the exponent bits. Inputs are clamped
// so that n stays in [-127, 127]: results below 2^-126 come out 0 (or a normal number just
// above), NaN stays NaN.
#ifndef KILN_NATIVE_SIMD_EXP_H
#define KILN_NATIVE_SIMD_EXP_H

namespace kiln_native {
namespace {

/* sum_i c[i] f^i over the 8 coefficients. */
template <class V>
static inline typename V::vec horner8(typename V::vec f, const float (&c)[8]) {
  typename V::vec p = V::splat(c[7]);
  for (int i = 6; i >= 0; i--) p = V::fma(p, f, V::splat(c[i]));
  return p;
}

/* 2^x; the clamps keep a NaN (min / max return their second operand when either is NaN). */
template <class V>
static inline typename V::vec vexp2(typename V::vec x) {
  constexpr float c[8] = {1.0f, 0.693147180559945f, 0.240226506959101f, 0.0555041086648216f,
                          0.00961812910762848f, 0.00133335581464284f, 0.000154035303933816f, 1.52527338040598e-05f};  // (ln 2)^i / i!
  x = V::min(V::splat(127.0f), V::max(V::splat(-127.0f), x));
  const typename V::vec n = V::round(x);
  return V::mul(horner8<V>(V::sub(x, n), c), V::pow2(n));
}

/* e^x */
template <class V>
static inline typename V::vec vexp(typename V::vec x) {
  constexpr float c[8] = {1.0f, 1.0f, 0.5f, 0.166666666666667f, 0.0416666666666667f, 0.00833333333333333f, 0.00138888888888889f, 0.000198412698412698f};  // 1 / i!
  x = V::min(V::splat(88.0f), V::max(V::splat(-88.0f), x));
  const typename V::vec n = V::round(V::mul(x, V::splat(1.44269504088896341f)));
  // r = x - n ln2, with ln2 = 0.693145751953125 (exact in 16 bits, so n * it is exact) + 1.42860677e-6
  const typename V::vec r = V::fma(n, V::splat(-1.42860677e-6f), V::fma(n, V::splat(-0.693145751953125f), x));
  return V::mul(horner8<V>(r, c), V::pow2(n));
}

}  // namespace
}  // namespace kiln_native

#endif
