// Native LayerNorm and RMSNorm, forward and the backward's rows pass (the math in
// norm_call.h), on one instruction set's vectors V. A row is read in whole vectors, the
// last one partial (nothing read or written past the row), 16-bit values widened in
// registers; sums over a row in two vector accumulators, then across lanes.
//   forward:  parts take contiguous ranges of rows; each row alone, so the bits do not
//             depend on the split.
//   backward: `partials` (fixed by the host from the shapes, not the threads) contiguous
//             ranges of rows, drawn from the call's counter; partial p sums its rows'
//             parameter gradients, in row order, into its own f32 rows of scratch.
#ifndef KILN_NATIVE_NEST_NORM_H
#define KILN_NATIVE_NEST_NORM_H

#include <math.h>
#include <string.h>

#include "nest_access.h"
#include "norm_call.h"

namespace kiln_native {
namespace {

template <class V, int DT>
static void norm_forward_row(const NormCall& a, int64_t r) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const int dim = a.dim;
  const int64_t at = r * dim;
  const uint8_t* x = a.x;
  if (a.residual) {
    for (int k = 0; k < dim; k += L) {
      const int w = imin(L, dim - k);
      vstore_n<V, DT>(a.sum, at + k, V::add(vload_n<V, DT>(a.x, at + k, w), vload_n<V, DT>(a.residual, at + k, w)), w);
    }
    x = a.sum;
  }
  const float inv_dim = 1.0f / (float)dim;
  float mean = 0.0f;
  if (a.layer) {
    vec s0 = V::zero(), s1 = V::zero();
    int k = 0;
    for (; k + 2 * L <= dim; k += 2 * L) {
      s0 = V::add(s0, vload<V, DT>(x, at + k));
      s1 = V::add(s1, vload<V, DT>(x, at + k + L));
    }
    for (; k < dim; k += L) s0 = V::add(s0, vload_n<V, DT>(x, at + k, dim - k));
    mean = V::hsum(V::add(s0, s1)) * inv_dim;
  }
  const vec vmean = V::splat(mean), zero = V::zero();
  vec q0 = zero, q1 = zero;
  int k = 0;
  for (; k + 2 * L <= dim; k += 2 * L) {
    const vec d0 = V::sub(vload<V, DT>(x, at + k), vmean), d1 = V::sub(vload<V, DT>(x, at + k + L), vmean);
    q0 = V::fma(d0, d0, q0);
    q1 = V::fma(d1, d1, q1);
  }
  for (; k < dim; k += L) {
    const int w = imin(L, dim - k);
    const vec d = V::keep(V::sub(vload_n<V, DT>(x, at + k, w), vmean), 0, w, zero);
    q0 = V::fma(d, d, q0);
  }
  const float rstd = 1.0f / sqrtf(V::hsum(V::add(q0, q1)) * inv_dim + a.eps);
  const vec vrstd = V::splat(rstd), voff = V::splat(a.weight_offset);
  for (int j = 0; j < dim; j += L) {
    const int w = imin(L, dim - j);
    vec y = V::mul(V::mul(V::sub(vload_n<V, DT>(x, at + j, w), vmean), vrstd), V::add(vload_n<V, DT>(a.weight, j, w), voff));
    if (a.bias) y = V::add(y, vload_n<V, DT>(a.bias, j, w));
    vstore_n<V, DT>(a.out, at + j, y, w);
  }
  if (a.layer) a.mean[r] = mean;
  a.rstd[r] = rstd;
}

template <class V, int DT>
static void norm_forward_typed(const NormCall& a, int part, int parts) {
  const int64_t r0 = (int64_t)a.rows * part / parts, r1 = (int64_t)a.rows * (part + 1) / parts;
  for (int64_t r = r0; r < r1; r++) norm_forward_row<V, DT>(a, r);
}

/* pw, pb, px: this partial's f32 rows (pb, px nullptr when not asked for). */
template <class V, int DT>
static void norm_backward_row(const NormCall& a, int64_t r, float* pw, float* pb, float* px) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const int dim = a.dim;
  const int64_t at = r * dim;
  const float inv_dim = 1.0f / (float)dim;
  const vec vmean = V::splat(a.layer ? a.mean[r] : 0.0f), vrstd = V::splat(a.rstd[r]), voff = V::splat(a.weight_offset);
  vec sg = V::zero(), sgx = V::zero();
  for (int k = 0; k < dim; k += L) {
    const int w = imin(L, dim - k);
    const vec d = vload_n<V, DT>(a.d_out, at + k, w);  // 0 past the row: adds 0 to every sum
    const vec xhat = V::mul(V::sub(vload_n<V, DT>(a.x, at + k, w), vmean), vrstd);
    const vec g = V::mul(d, V::add(vload_n<V, DT>(a.weight, k, w), voff));
    sg = V::add(sg, g);
    sgx = V::fma(g, xhat, sgx);
    vstore_n<V, kF32>((uint8_t*)pw, k, V::fma(d, xhat, vload_n<V, kF32>((const uint8_t*)pw, k, w)), w);
    if (pb) vstore_n<V, kF32>((uint8_t*)pb, k, V::add(vload_n<V, kF32>((const uint8_t*)pb, k, w), d), w);
  }
  const vec gmean = V::splat(a.layer ? V::hsum(sg) * inv_dim : 0.0f), gxmean = V::splat(V::hsum(sgx) * inv_dim);
  for (int k = 0; k < dim; k += L) {
    const int w = imin(L, dim - k);
    const vec xhat = V::mul(V::sub(vload_n<V, DT>(a.x, at + k, w), vmean), vrstd);
    const vec g = V::mul(vload_n<V, DT>(a.d_out, at + k, w), V::add(vload_n<V, DT>(a.weight, k, w), voff));
    vec v = V::mul(vrstd, V::sub(V::sub(g, gmean), V::mul(xhat, gxmean)));
    if (a.d_res) v = V::add(v, vload_n<V, DT>(a.d_res, at + k, w));
    vstore_n<V, DT>(a.d_x, at + k, v, w);
    if (px) vstore_n<V, kF32>((uint8_t*)px, k, V::add(vload_n<V, kF32>((const uint8_t*)px, k, w), vload_n<V, DT>(a.d_x, at + k, w)), w);
  }
}

template <class V, int DT>
static void norm_backward_typed(const NormCall& a) {
  const int64_t dim4 = (a.dim + 3) / 4 * 4;
  for (uint32_t p; (p = __atomic_fetch_add(a.tickets, 1u, __ATOMIC_RELAXED)) < (uint32_t)a.partials;) {
    float* pw = a.scratch + (int64_t)p * a.stride;
    float* pb = a.d_bias ? pw + dim4 : nullptr;
    float* px = a.d_x_sums ? pw + 2 * dim4 : nullptr;
    memset(pw, 0, sizeof(float) * (size_t)dim4);
    if (pb) memset(pb, 0, sizeof(float) * (size_t)dim4);
    if (px) memset(px, 0, sizeof(float) * (size_t)dim4);
    const int64_t r0 = (int64_t)a.rows * p / a.partials, r1 = (int64_t)a.rows * (p + 1) / a.partials;
    for (int64_t r = r0; r < r1; r++) norm_backward_row<V, DT>(a, r, pw, pb, px);
  }
}

template <class V>
static void norm_forward(const NormCall& a, int part, int parts) {
  if (a.dt == kF32) norm_forward_typed<V, kF32>(a, part, parts);
  else if (a.dt == kBf16) norm_forward_typed<V, kBf16>(a, part, parts);
  else norm_forward_typed<V, kF16>(a, part, parts);
}

template <class V>
static void norm_backward(const NormCall& a, int, int) {
  if (a.dt == kF32) norm_backward_typed<V, kF32>(a);
  else if (a.dt == kBf16) norm_backward_typed<V, kBf16>(a);
  else norm_backward_typed<V, kF16>(a);
}

}  // namespace
}  // namespace kiln_native

#endif
