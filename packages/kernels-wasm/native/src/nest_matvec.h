// Matrix-vector products for the native matmul: calls whose output is one row (m == 1)
// or one column (n == 1) stream the matrix from memory unpacked, as csrc/matmul_vector.c
// does, and sum in its order so the results are the same bits:
//   rows_dot_vector:   out[i] = sum_p X[i, p] v[p]   16 f32 lanes over p (lane l takes
//                      p = l mod 16), then four values p mod 4 into lanes 0-3, the lanes
//                      added as ((l0+l4)+(l8+l12)) ... then across, then the last
//                      p one by one (multiply, then add)
//   vector_times_rows: out[j] = sum_p v[p] X[p, j]   one FMA chain per output, p in order
// then out = alpha * sum (+ out when accumulating) (+ bias), rounded once to out's dtype.
#ifndef KILN_NATIVE_NEST_MATVEC_H
#define KILN_NATIVE_NEST_MATVEC_H

#include "nest_access.h"

namespace kiln_native {
namespace {

/* Where the outputs go: out[i] (dtype CT), with bias[i * bias_step] (dtype DT) when bias. */
struct MatvecOut {
  uint8_t* out;
  float alpha;
  bool accumulate;
  const uint8_t* bias;
  int bias_step;  // 1: one bias per output; 0: bias[0] for all
};

template <class V, int DT, int CT>
static inline void store_output(const MatvecOut& o, int64_t i, float sum) {
  float y = o.alpha * sum;
  if (o.accumulate) y = y + load1<V, CT>(o.out, i);
  if (o.bias) y = y + load1<V, DT>(o.bias, i * o.bias_step);
  store1<V, CT>(o.out, i, y);
}

/* Row `row` (k elements from element `at`) of X dotted with the f32 vector v. */
template <class V, int DT>
static inline float row_dot(const uint8_t* x, int64_t at, const float* v, int k) {
  constexpr int Q = 16 / V::L;  // vectors per 16 lanes
  typename V::vec acc[Q];
  for (int q = 0; q < Q; q++) acc[q] = V::zero();
  int p = 0;
  for (; p + 16 <= k; p += 16)
    for (int q = 0; q < Q; q++) acc[q] = V::fma(vload<V, DT>(x, at + p + q * V::L), V::load(v + p + q * V::L), acc[q]);
  float l[16];
  for (int q = 0; q < Q; q++) V::store(l + q * V::L, acc[q]);
  for (; p + 4 <= k; p += 4)
    for (int i = 0; i < 4; i++) l[i] = V::fma1(load1<V, DT>(x, at + p + i), v[p + i], l[i]);
  float t[4];
  for (int i = 0; i < 4; i++) t[i] = (l[i] + l[4 + i]) + (l[8 + i] + l[12 + i]);
  float sum = ((t[0] + t[1]) + t[2]) + t[3];
  for (; p < k; p++) sum = sum + load1<V, DT>(x, at + p) * v[p];
  return sum;
}

/* out[i] for i in [i0, i1): rows of X (ldx apart) dotted with v (dtype DT, k long). */
template <class V, int DT, int CT>
static void rows_dot_vector(const uint8_t* x, int64_t ldx, const uint8_t* v, int k, const MatvecOut& out, int i0, int i1,
                            float* work) {
  const float* vf = (const float*)v;
  if (DT != kF32) { /* v once in f32, not once per row */
    for (int p = 0; p < k; p++) work[p] = load1<V, DT>(v, p);
    vf = work;
  }
  for (int i = i0; i < i1; i++) store_output<V, DT, CT>(out, i, row_dot<V, DT>(x, i * ldx, vf, k));
}

/* out[j] for j in [j0, j1): v (dtype DT, k long) weighting the rows of X (ldx apart); W columns at a time in registers. */
template <class V, int DT, int CT>
static void vector_times_rows(const uint8_t* x, int64_t ldx, const uint8_t* v, int k, const MatvecOut& out, int j0, int j1) {
  constexpr int Q = 8;  // accumulators
  constexpr int W = Q * V::L;
  const typename V::vec alpha = V::splat(out.alpha);
  const typename V::vec shared_bias = out.bias && !out.bias_step ? V::splat(load1<V, DT>(out.bias, 0)) : V::zero();
  for (int jb = j0; jb < j1; jb += W) {
    const int w = imin(W, j1 - jb);
    const int vectors = (w + V::L - 1) / V::L;
    typename V::vec acc[Q];
    for (int q = 0; q < Q; q++) acc[q] = V::zero();
    int64_t at = jb;
    if (w == W) {
      for (int p = 0; p < k; p++, at += ldx) {
        const typename V::vec s = V::splat(load1<V, DT>(v, p));
#pragma GCC unroll 8
        for (int q = 0; q < Q; q++) acc[q] = V::fma(s, vload<V, DT>(x, at + q * V::L), acc[q]);
      }
    } else {
      for (int p = 0; p < k; p++, at += ldx) {
        const typename V::vec s = V::splat(load1<V, DT>(v, p));
        for (int q = 0; q < vectors; q++) acc[q] = V::fma(s, vload_n<V, DT>(x, at + q * V::L, w - q * V::L), acc[q]);
      }
    }
    for (int q = 0; q < vectors; q++) {
      const int n = w - q * V::L;
      const int64_t j = jb + q * V::L;
      typename V::vec y = V::mul(acc[q], alpha);
      if (out.accumulate) y = V::add(y, vload_n<V, CT>(out.out, j, n));
      if (out.bias) y = V::add(y, out.bias_step ? vload_n<V, DT>(out.bias, j, n) : shared_bias);
      vstore_n<V, CT>(out.out, j, y, n);
    }
  }
}

}  // namespace
}  // namespace kiln_native

#endif
