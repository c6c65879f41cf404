// ssd_y.h: the forward's output kernel, shared by ssd.cu (Mamba2) and mamba3.cu (Mamba3).
// Block (kYTile tokens t of one chunk, b·h), S the state entering the chunk:
//   y_t = D x_t + exp(Λ_t) S C_t + Σ_{s<t} exp(Λ_t − Λ_s)(C_t·B_s) wo_s x_s + (C_t·B_t) wd_t x_t
// Mamba2 (kTrapezoid false): B, C in T (rows bcRowStride apart, one per group), wo = dt
// and the diagonal taken in the same sum (s ≤ t, no wd). Mamba3: the turned rows B̄, C̄ in
// f32, one per head (B, L, H, N), wo = γ + μ and wd = γ.
#pragma once
#include "ssd_scan.h"

namespace kiln {
namespace {

constexpr int kMaxP = 256;  // SSD_MAX_HEAD_DIM in @kiln/contract
constexpr int kMaxN = 256;  // SSD_MAX_STATE_SIZE
constexpr int kYTile = 8;   // tokens per block of y

/**
 * y (see the head): C_t·B_s (a warp per s), S C_t (a warp per row of S), then a thread per
 * (t, p). Each row of B and of S is read once for the tile's tokens. lam, wo and wd are
 * per-token f32 (bh*L + t); B and C in V (T, or f32 for Mamba3).
 */
template <typename T, typename V, bool kTrapezoid>
__global__ void __launch_bounds__(kThreads) ssd_y_kernel(const T* x, const V* Bm, const V* Cm, const T* Dv, const float* states, const float* lam,
                                                          const float* wo, const float* wd, T* y, SsdDims d) {
  __shared__ float cs[kYTile][kMaxN];
  __shared__ float coef[kYTile][kMaxQ];
  __shared__ float sc[kYTile][kMaxP];
  const SsdTile tl(d, blockIdx.x, kYTile);
  if (tl.ta >= tl.t1) return;
  const int64_t bh = d.bh0 + blockIdx.y;
  const int64_t b = bh / d.H, h = bh - b * d.H;
  const int64_t bcs = kTrapezoid ? d.H * d.N : d.bcs, bc0 = (kTrapezoid ? h : h / (d.H / d.G)) * d.N;  // B, C rows and this head's
  const int nt = static_cast<int>(tl.tb - tl.ta);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* lr = lam + bh * d.L;
  const float* wor = wo + bh * d.L;
  const float* wdr = kTrapezoid ? wd + bh * d.L : nullptr;
  for (int64_t i = tid; i < kYTile * d.N; i += kThreads) {
    const int j = static_cast<int>(i / d.N);
    const int64_t n = i - j * d.N;
    cs[j][n] = j < nt ? to_f32(Cm[(b * d.L + tl.ta + j) * bcs + bc0 + n]) : 0.0f;
  }
  __syncthreads();
  // C_t·B_s for the tile's tokens t and the chunk's s up to the tile's last token: a warp per s.
  for (int64_t s = tl.t0 + warp; s < tl.tb; s += kWarps) {
    const V* brow = Bm + (b * d.L + s) * bcs + bc0;
    float a[kYTile];
#pragma unroll
    for (int j = 0; j < kYTile; j++) a[j] = 0.0f;
    for (int64_t n = lane; n < d.N; n += 32) {
      const float bv = to_f32(brow[n]);
#pragma unroll
      for (int j = 0; j < kYTile; j++) a[j] = fmaf(cs[j][n], bv, a[j]);
    }
    warp_sum_many(a);
    const int j = warp_sum_index<kYTile>(lane);
    if (warp_sum_writer<kYTile>(lane) && j < nt) {
      const int64_t t = tl.ta + j;
      if constexpr (kTrapezoid) coef[j][s - tl.t0] = s < t ? expf(lr[t] - lr[s]) * a[0] * wor[s] : s == t ? a[0] * wdr[s] : 0.0f;
      else coef[j][s - tl.t0] = s <= t ? expf(lr[t] - lr[s]) * a[0] * wor[s] : 0.0f;
    }
  }
  // S C_t: a warp per row p of the entry state.
  const float* S = states + (bh * d.chunks + tl.c) * d.PN();
  for (int64_t p = warp; p < d.P; p += kWarps) {
    float a[kYTile];
#pragma unroll
    for (int j = 0; j < kYTile; j++) a[j] = 0.0f;
    for (int64_t n = lane; n < d.N; n += 32) {
      const float sv = S[p * d.N + n];
#pragma unroll
      for (int j = 0; j < kYTile; j++) a[j] = fmaf(sv, cs[j][n], a[j]);
    }
    warp_sum_many(a);
    const int j = warp_sum_index<kYTile>(lane);
    if (warp_sum_writer<kYTile>(lane) && j < nt) sc[j][p] = a[0];
  }
  __syncthreads();
  // A thread per (token, p).
  const float D = to_f32(Dv[h]);
  for (int64_t i = tid; i < nt * d.P; i += kThreads) {
    const int j = static_cast<int>(i / d.P);
    const int64_t p = i - j * d.P, t = tl.ta + j;
    const T* xp = x + h * d.P + p;
    float acc = 0.0f;
    for (int64_t s = tl.t0; s <= t; s++) acc = fmaf(coef[j][s - tl.t0], to_f32(xp[(b * d.L + s) * d.xs]), acc);
    y[((b * d.L + t) * d.H + h) * d.P + p] = from_f32<T>(D * to_f32(xp[(b * d.L + t) * d.xs]) + expf(lr[t]) * sc[j][p] + acc);
  }
}

}  // namespace
}  // namespace kiln
