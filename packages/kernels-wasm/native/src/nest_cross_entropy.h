// Native fused softmax + cross-entropy (the math in cross_entropy_call.h) on one instruction
// set's vectors V, as csrc/cross_entropy.c computes it: a row is read in three sweeps (max,
// sum of exponentials, write), so rows of any length stream through the cache; the sum of
// exponentials accumulates in f32 lanes over blocks of 2048 elements and in f64 across
// blocks, and lse = max + log(sum) in f64. The forward-backward call runs a row's backward
// right after its forward, while the row is still in the cache. Parts take contiguous runs
// of whole rows and a row is computed by one part alone, so the bits do not depend on the
// split.
#ifndef KILN_NATIVE_NEST_CROSS_ENTROPY_H
#define KILN_NATIVE_NEST_CROSS_ENTROPY_H

#include <math.h>

#include "cross_entropy_call.h"
#include "nest_access.h"
#include "simd_exp.h"

namespace kiln_native {
namespace {

constexpr int64_t kSumBlock = 2048;

template <class V>
static inline float first_lane(typename V::vec v) {
  float lanes[V::L];
  V::store(lanes, v);
  return lanes[0];
}

/* max_j x[j] over one row (a NaN element is passed over by the max, and reaches lse through the sum). */
template <class V, int DT>
static inline float ce_row_max(const uint8_t* x, int64_t n) {
  using vec = typename V::vec;
  const vec lowest = V::splat(-INFINITY);
  vec m0 = lowest, m1 = lowest, m2 = lowest, m3 = lowest;
  int64_t j = 0;
  for (; j + 4 * V::L <= n; j += 4 * V::L) {
    m0 = V::max(vload<V, DT>(x, j), m0);
    m1 = V::max(vload<V, DT>(x, j + V::L), m1);
    m2 = V::max(vload<V, DT>(x, j + 2 * V::L), m2);
    m3 = V::max(vload<V, DT>(x, j + 3 * V::L), m3);
  }
  for (; j + V::L <= n; j += V::L) m0 = V::max(vload<V, DT>(x, j), m0);
  if (j < n) {
    const int w = (int)(n - j);
    m1 = V::max(V::keep(vload_n<V, DT>(x, j, w), 0, w, lowest), m1);
  }
  return V::hmax(V::max(V::max(m0, m1), V::max(m2, m3)));
}

/* sum_j exp(x[j] - shift) over one row: f32 lanes within each block of kSumBlock, f64 across them. */
template <class V, int DT>
static inline double ce_row_sum_exp(const uint8_t* x, int64_t n, float shift) {
  using vec = typename V::vec;
  const vec s = V::splat(shift);
  double total = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t end = imin64(n, b + kSumBlock);
    vec s0 = V::zero(), s1 = s0, s2 = s0, s3 = s0;
    int64_t j = b;
    for (; j + 4 * V::L <= end; j += 4 * V::L) {
      s0 = V::add(s0, vexp<V>(V::sub(vload<V, DT>(x, j), s)));
      s1 = V::add(s1, vexp<V>(V::sub(vload<V, DT>(x, j + V::L), s)));
      s2 = V::add(s2, vexp<V>(V::sub(vload<V, DT>(x, j + 2 * V::L), s)));
      s3 = V::add(s3, vexp<V>(V::sub(vload<V, DT>(x, j + 3 * V::L), s)));
    }
    for (; j + V::L <= end; j += V::L) s0 = V::add(s0, vexp<V>(V::sub(vload<V, DT>(x, j), s)));
    if (j < end) {
      /* Only the lanes that hold elements count. */
      const int w = (int)(end - j);
      s1 = V::add(s1, V::keep(vexp<V>(V::sub(vload_n<V, DT>(x, j, w), s)), 0, w, V::zero()));
    }
    total += (double)V::hsum(V::add(V::add(s0, s1), V::add(s2, s3)));
  }
  return total;
}

/* out[j] = mul exp(x[j] - shift) over one row; out may be x (each vector is read before it is written). */
template <class V, int DT>
static inline void ce_row_write_exp(const uint8_t* x, uint8_t* out, int64_t n, float shift, float mul) {
  using vec = typename V::vec;
  const vec s = V::splat(shift), k = V::splat(mul);
  for (int64_t j = 0; j < n; j += V::L) {
    const int w = (int)imin64(V::L, n - j);
    vstore_n<V, DT>(out, j, V::mul(k, vexp<V>(V::sub(vload_n<V, DT>(x, j, w), s))), w);
  }
}

template <class V, int DT>
static inline void ce_forward_row(const CrossEntropyCall& c, int64_t r) {
  const int64_t n = c.vocab;
  const uint8_t* x = c.logits + r * n * element_bytes<DT>();
  const float m = ce_row_max<V, DT>(x, n);
  const double lse = (double)m + log(ce_row_sum_exp<V, DT>(x, n, m));
  const int32_t t = c.targets[r];
  c.lse[r] = (float)lse;
  /* The host rejects targets >= vocab; never read past the row if one slips through. */
  c.losses[r] = t < 0 ? 0.0f : t < c.vocab ? (float)(lse - (double)load1<V, DT>(x, t)) : NAN;
}

template <class V, int DT>
static inline void ce_backward_row(const CrossEntropyCall& c, int64_t r) {
  const int64_t n = c.vocab, at = r * n;
  const uint8_t* x = c.logits + at * element_bytes<DT>();
  uint8_t* dx = c.d_logits + at * element_bytes<DT>();
  const int32_t t = c.targets[r];
  if (t < 0 || t >= c.vocab) {
    for (int64_t j = 0; j < n; j += V::L) vstore_n<V, DT>(dx, j, V::zero(), (int)imin64(V::L, n - j));
    return;
  }
  const float lse = c.lse[r];
  /* The target's logit, read before the row is overwritten (dLogits may be logits). */
  const float xt = load1<V, DT>(x, t);
  ce_row_write_exp<V, DT>(x, dx, n, lse, c.scale);
  const float pt = first_lane<V>(vexp<V>(V::splat(xt - lse)));
  store1<V, DT>(dx, t, c.scale * (pt - 1.0f));
}

template <class V, int DT>
static void cross_entropy_typed(const CrossEntropyCall& c, int part, int parts) {
  const int64_t lo = (int64_t)c.rows * part / parts, hi = (int64_t)c.rows * (part + 1) / parts;
  for (int64_t r = lo; r < hi; r++) {
    if (c.mode != kCrossEntropyBackward) ce_forward_row<V, DT>(c, r);
    if (c.mode != kCrossEntropyForward) ce_backward_row<V, DT>(c, r);
  }
}

template <class V>
static void cross_entropy(const CrossEntropyCall& c, int part, int parts) {
  if (c.dt == kF32) cross_entropy_typed<V, kF32>(c, part, parts);
  else if (c.dt == kBf16) cross_entropy_typed<V, kBf16>(c, part, parts);
  else cross_entropy_typed<V, kF16>(c, part, parts);
}

}  // namespace
}  // namespace kiln_native

#endif
