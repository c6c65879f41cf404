// Native GELU forward and backward (the math in activation_call.h) on one instruction set's
// vectors V, as csrc/activation.c computes them: sigmoid(z) from e = e^-|z| <= 1, which never
// overflows (z >= 0: s = 1 / (1 + e), 1 - s = e s; z < 0: s = e / (1 + e), 1 - s = 1 / (1 + e));
// the backward clamps x to +-1e4 (past it gelu'(x) is exactly 0 or 1) to keep x^2 finite.
// Parts take contiguous ranges of whole 16-element blocks; each element is computed alone,
// so the bits do not depend on the split. Each vector is read before it is written.
#ifndef KILN_NATIVE_NEST_ACTIVATION_H
#define KILN_NATIVE_NEST_ACTIVATION_H

#include "activation_call.h"
#include "nest_access.h"
#include "simd_exp.h"

namespace kiln_native {
namespace {

constexpr float kGeluK0 = 1.59576912160573071f;  // 2 sqrt(2/pi)
constexpr float kGeluK1 = 0.0713548162726008f;   // 2 sqrt(2/pi) 0.044715

/* sigmoid(z) and 1 - sigmoid(z) */
template <class V>
static inline void sigmoid(typename V::vec z, typename V::vec* s, typename V::vec* s1) {
  const typename V::vec e = vexp<V>(V::neg_abs(z));
  const typename V::vec q = V::div(V::splat(1.0f), V::add(V::splat(1.0f), e));
  const typename V::vec eq = V::mul(e, q);
  *s = V::where_negative(z, eq, q);
  *s1 = V::where_negative(z, q, eq);
}

template <class V>
static inline typename V::vec gelu_forward1(typename V::vec x) {
  typename V::vec s, s1;
  sigmoid<V>(V::mul(x, V::fma(V::splat(kGeluK1), V::mul(x, x), V::splat(kGeluK0))), &s, &s1);
  return V::mul(x, s);
}

template <class V>
static inline typename V::vec gelu_grad1(typename V::vec x) {
  x = V::min(V::splat(1e4f), V::max(V::splat(-1e4f), x));
  const typename V::vec x2 = V::mul(x, x);
  typename V::vec s, s1;
  sigmoid<V>(V::mul(x, V::fma(V::splat(kGeluK1), x2, V::splat(kGeluK0))), &s, &s1);
  const typename V::vec dz = V::fma(V::splat(3.0f * kGeluK1), x2, V::splat(kGeluK0));
  return V::fma(V::mul(x, s), V::mul(s1, dz), s);
}

/* Elements [lo, hi) of the part: lo, hi at multiples of 16 (the last part to n). */
static inline void activation_range(int64_t n, int part, int parts, int64_t* lo, int64_t* hi) {
  const int64_t blocks = (n + 15) / 16;
  *lo = blocks * part / parts * 16;
  *hi = blocks * (part + 1) / parts * 16;
  if (*hi > n) *hi = n;
  if (*lo > n) *lo = n;
}

template <class V, int DT, bool kBackward>
static void gelu_typed(const ActivationCall& a, int part, int parts) {
  int64_t lo, hi;
  activation_range(a.n, part, parts, &lo, &hi);
  for (int64_t i = lo; i < hi; i += V::L) {
    const int w = (int)imin64(V::L, hi - i);
    const typename V::vec x = vload_n<V, DT>(a.x, i, w);
    const typename V::vec y = kBackward ? V::mul(gelu_grad1<V>(x), vload_n<V, DT>(a.d_out, i, w)) : gelu_forward1<V>(x);
    vstore_n<V, DT>(a.out, i, y, w);
  }
}

template <class V, bool kBackward>
static void gelu(const ActivationCall& a, int part, int parts) {
  if (a.dt == kF32) gelu_typed<V, kF32, kBackward>(a, part, parts);
  else if (a.dt == kBf16) gelu_typed<V, kBf16, kBackward>(a, part, parts);
  else gelu_typed<V, kF16, kBackward>(a, part, parts);
}

}  // namespace
}  // namespace kiln_native

#endif
