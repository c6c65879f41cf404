// mamba3.cu: mamba3ScanForward (mamba3_backward.cu: mamba3ScanBackward; mamba3_scan.h what
// they share), Mamba3's trapezoidal scan with B/C biases and the data-dependent rotation,
// by chunks of Q tokens as Mamba2's (ssd.cu), f32 sums for every dtype.
// Per batch b and head h (group g shares B and C): Δ_t = softplus(dtRaw + dtBias[h]),
// λ_t = sigmoid(lambdaRaw), A = -exp(aLog[h]), γ_t = λ_t Δ_t, μ_t = (1 − λ_{t+1}) Δ_{t+1}
// (0 at the last token), B̄_t = R(φ_t)(B_t + bBias[h]), C̄_t likewise, φ_t = Σ_{r≤t} Δ_r θ_r
// (pairs (2k, 2k+1) turned; R = 1 without theta). The kernels carry
//   G_t = α_t G_{t−1} + wo_t x_t B̄_tᵀ,  wo_t = γ_t + μ_t,  α_t = exp(Δ_t A),
// so that with Λ_t the running sum of Δ·A inside t's chunk, S the G entering it (states[c]):
//   y_t   = D x_t + exp(Λ_t) S C̄_t + Σ_{s<t} exp(Λ_t − Λ_s)(C̄_t·B̄_s) wo_s x_s + (C̄_t·B̄_t) γ_t x_t
//   S_out = exp(Λ_E) S + Σ_s exp(Λ_E − Λ_s) wo_s x_s B̄_sᵀ         (E the chunk's last token)
// Layouts (the contract's, packages/contract/src/kernels/mamba3.ts): x (B, L, H·P) rows
// xRowStride apart, dtRaw (B, L, H) dtRowStride apart, B and C (B, L, G·N) bcRowStride apart,
// lambdaRaw (B, L, H) and theta (B, L, H·N/2) dense, y (B, L, H·P) dense, states f32
// (B, H, chunks, P, N).
//   forward
//     prep      one thread per (b, h, chunk): Δ_t, Λ_t, wo_t, wd_t = γ_t into f32 scratch
//     turn      one thread per (b, h, pair): the angle summed in token order, B̄ and C̄
//               (B, L, H, N) in f32 scratch; without theta a thread per element
//     contrib   ssd_chunk_outer_kernel on B̄ with the weights wo, written to states[c+1]
//     carry     ssd_carry_kernel: states[0] = 0, states[c] = exp(E_{c−1}) states[c−1] + contribution
//     y         block per (8 tokens t of a chunk, b·h): C̄_t·B̄_s (a warp per s), S C̄_t (a
//               warp per row of S), then a thread per (t, p) sums y_t above
//   backward: see mamba3_backward.cu.
// Every sum runs in a fixed order and no kernel uses atomics: the same bits on every call.
#include "mamba3_scan.h"

namespace kiln {
namespace {

constexpr int kMaxP = 256;  // SSD_MAX_HEAD_DIM in @kiln/contract
constexpr int kMaxN = 256;  // SSD_MAX_STATE_SIZE
constexpr int kYTile = 8;   // tokens per block of y

/** Block (kYTile tokens of one chunk, b·h): y (see the file's head). Each row of B̄ and of the entry state S is read once for the tile's tokens. */
template <typename T>
__global__ void __launch_bounds__(kThreads) mamba3_y_kernel(const T* x, const float* bbar, const float* cbar, const T* Dv, const float* states, Mamba3Tokens w,
                                                             T* y, SsdDims d) {
  __shared__ float cs[kYTile][kMaxN];
  __shared__ float coef[kYTile][kMaxQ];
  __shared__ float sc[kYTile][kMaxP];
  const SsdTile tl(d, blockIdx.x, kYTile);
  if (tl.ta >= tl.t1) return;
  const int64_t bh = d.bh0 + blockIdx.y;
  const int64_t b = bh / d.H, h = bh - b * d.H, HN = d.H * d.N;
  const int nt = static_cast<int>(tl.tb - tl.ta);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* lr = w.lam + bh * d.L;
  const float* wo = w.wo + bh * d.L;
  const float* wd = w.wd + bh * d.L;
  for (int64_t i = tid; i < kYTile * d.N; i += kThreads) {
    const int j = static_cast<int>(i / d.N);
    const int64_t n = i - j * d.N;
    cs[j][n] = j < nt ? cbar[(b * d.L + tl.ta + j) * HN + h * d.N + n] : 0.0f;
  }
  __syncthreads();
  // C̄_t·B̄_s for the tile's tokens t and the chunk's s up to the tile's last token: a warp per s.
  for (int64_t s = tl.t0 + warp; s < tl.tb; s += kWarps) {
    const float* brow = bbar + (b * d.L + s) * HN + h * d.N;
    float a[kYTile];
#pragma unroll
    for (int j = 0; j < kYTile; j++) a[j] = 0.0f;
    for (int64_t n = lane; n < d.N; n += 32) {
      const float bv = brow[n];
#pragma unroll
      for (int j = 0; j < kYTile; j++) a[j] = fmaf(cs[j][n], bv, a[j]);
    }
    warp_sum_many(a);
    const int j = warp_sum_index<kYTile>(lane);
    if (warp_sum_writer<kYTile>(lane) && j < nt) {
      const int64_t t = tl.ta + j;
      coef[j][s - tl.t0] = s < t ? expf(lr[t] - lr[s]) * a[0] * wo[s] : s == t ? a[0] * wd[s] : 0.0f;
    }
  }
  // S C̄_t: a warp per row p of the entry state.
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

// mamba3ScanForward: x, dt, lambda, theta, B, C, bBias, cBias, dtBias, aLog, D, y, states | batch, seqLen, heads, headDim,
//                    groups, stateSize, chunkSize, xRowStride, dtRowStride, bcRowStride, dtype
void launch_mamba3_forward(const KernelCall& c) {
  const char* name = "mamba3ScanForward";
  const SsdDims d = dims_of(c, 13);
  const int64_t bhl = d.batch * d.H * d.L, nrows = d.batch * d.L * d.H * d.N;
  float* base = static_cast<float*>(c.scratch(sizeof(float) * (4 * padded(bhl) + 2 * padded(nrows))));
  Mamba3Tokens w{};
  w.delta = base;
  w.lam = w.delta + padded(bhl);
  w.wo = w.lam + padded(bhl);
  w.wd = w.wo + padded(bhl);
  float* bbar = w.wd + padded(bhl);
  float* cbar = bbar + padded(nrows);
  float* states = c.ptr<float>(12);
  dispatch_float(c.i32(23), name, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.ptr<const T>(0);
    launch_mamba3_inputs<T>(name, c.stream, c.ptr<const T>(1), c.ptr<const T>(2), c.ptr<const T>(3), c.ptr<const T>(4), c.ptr<const T>(5),
                            c.ptr<const T>(6), c.ptr<const T>(7), c.ptr<const T>(8), c.ptr<const T>(9), w, bbar, cbar, nullptr, d);
    if (d.chunks > 1) {
      over_bh_slices(per_head_rows(d), [&](const SsdDims& s, unsigned rows) {
        launch(name, ssd_chunk_outer_kernel<T, true, float>, dim3(static_cast<unsigned>(d.chunks - 1), rows, ceil_div(elems(d.PN()), kThreads)), kThreads, 0,
               c.stream, x, static_cast<const float*>(bbar), static_cast<const float*>(w.wo), static_cast<const float*>(w.lam), states, s);
      });
    }
    launch(name, ssd_carry_kernel<true>, grid_stride_blocks(d.batch * d.H * d.PN(), kThreads), kThreads, 0, c.stream, states, static_cast<const float*>(w.lam), d);
    over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
      launch(name, mamba3_y_kernel<T>, dim3(static_cast<unsigned>(d.chunks * ((d.Q + kYTile - 1) / kYTile)), rows), kThreads, 0, c.stream, x,
             static_cast<const float*>(bbar), static_cast<const float*>(cbar), c.ptr<const T>(10), static_cast<const float*>(states), w, c.ptr<T>(11), s);
    });
  });
}

}  // namespace

KILN_REGISTER_KERNEL("mamba3ScanForward", launch_mamba3_forward);

}  // namespace kiln
