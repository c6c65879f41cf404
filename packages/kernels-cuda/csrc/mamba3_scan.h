// mamba3_scan.h: what the Mamba3 scan's kernels share (mamba3.cu forward,
// mamba3_backward.cu backward): the per-token scalars (Δ, the running sum of Δ·A inside a
// chunk, the input weights wo and wd) and the turned rows B̄ and C̄ of every head, in f32
// scratch. The math and the kernels are described at the top of mamba3.cu; the pieces the
// scan has in common with Mamba2's (the chunks' outer-product sums, the carry across
// chunks, the group sums of dB and dC, the token tiles) come from ssd_scan.h.
#pragma once
#include "ssd_scan.h"

namespace kiln {
namespace {

/** Per-token f32 scratch of one (b, h), indexed bh*L + t. */
struct Mamba3Tokens {
  float* delta;  // Δ_t = softplus(dtRaw + dtBias)
  float* lam;    // Λ_t: the running sum of Δ·A inside t's chunk
  float* wo;     // γ_t + μ_t: the weight of x_t B̄_tᵀ in the carried state and for later tokens
  float* wd;     // γ_t: its weight on the diagonal (y_t's own term)
};

/** λ = sigmoid(v) and 1 − λ = sigmoid(−v), each to a few ulps at any v, with one division. */
__device__ __forceinline__ void sigmoid_pair(float v, float& lam, float& rest) {
  const float e = expf(-fabsf(v)), r = 1.0f / (1.0f + e);
  lam = v >= 0.0f ? r : e * r;
  rest = v >= 0.0f ? e * r : r;
}

/** The dimensions with a "group" per head and rows of H·N: how the kernels of ssd_scan.h read B̄ and C̄ (B, L, H, N). */
SsdDims per_head_rows(const SsdDims& d) {
  SsdDims s = d;
  s.G = d.H;
  s.bcs = d.H * d.N;
  return s;
}

/**
 * One thread per (b, h, chunk): Δ_t, Λ_t, wo_t = λ_t Δ_t + (1 − λ_{t+1}) Δ_{t+1} (no second
 * term at the sequence's last token) and wd_t = λ_t Δ_t; the chunk's last token reads the
 * next chunk's first dtRaw and lambdaRaw.
 */
template <typename T>
__global__ void __launch_bounds__(kThreads) mamba3_prep_kernel(const T* dt_raw, const T* lambda_raw, const T* dt_bias, const T* a_log, Mamba3Tokens w,
                                                                SsdDims d) {
  const int64_t total = d.batch * d.H * d.chunks;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const SsdChunk ch(d, i, a_log, dt_bias);
    const auto delta_at = [&](int64_t t) { return softplus_f(to_f32(dt_raw[(ch.b * d.L + t) * d.dts + ch.h]) + ch.bias); };
    const auto lambda_at = [&](int64_t t) { return to_f32(lambda_raw[(ch.b * d.L + t) * d.H + ch.h]); };
    float dcur = delta_at(ch.t0), lcur, rest;
    sigmoid_pair(lambda_at(ch.t0), lcur, rest);
    float run = 0.0f;
    for (int64_t t = ch.t0; t < ch.t1; t++) {
      float dnext = 0.0f, lnext = 0.0f, mu = 0.0f;
      if (t + 1 < d.L) {
        dnext = delta_at(t + 1);
        sigmoid_pair(lambda_at(t + 1), lnext, rest);
        mu = rest * dnext;  // (1 − λ_{t+1}) Δ_{t+1}
      }
      const float gamma = lcur * dcur;
      run = fmaf(dcur, ch.A, run);
      const int64_t at = ch.bh * d.L + t;
      w.delta[at] = dcur;
      w.lam[at] = run;
      w.wo[at] = gamma + mu;
      w.wd[at] = gamma;
      dcur = dnext;
      lcur = lnext;
    }
  }
}

/**
 * B̄ and C̄ (B, L, H, N) in f32. kRotate: one thread per (b, h, pair k), the angle
 * φ_t = Σ_{r≤t} Δ_r θ_r summed in token order, each pair (2k, 2k+1) of B̂ = B + bBias and
 * Ĉ = C + cBias turned by it (phis, when given, keeps φ_t at (b, t, h, k)); otherwise one
 * thread per (b, t, h, n): B̂ and Ĉ as they are.
 */
template <typename T, bool kRotate>
__global__ void __launch_bounds__(kThreads) mamba3_turn_kernel(const T* Bm, const T* Cm, const T* theta, const T* b_bias, const T* c_bias, const float* delta,
                                                                float* bbar, float* cbar, float* phis, SsdDims d) {
  const int64_t HN = d.H * d.N, per = d.H / d.G;
  if (!kRotate) {
    const int64_t total = d.batch * d.L * HN;
    for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
      const int64_t row = i / HN, e = i - row * HN, h = e / d.N, n = e - h * d.N;
      const int64_t src = row * d.bcs + (h / per) * d.N + n;
      bbar[i] = to_f32(Bm[src]) + to_f32(b_bias[e]);
      cbar[i] = to_f32(Cm[src]) + to_f32(c_bias[e]);
    }
    return;
  }
  const int64_t K = d.N / 2, total = d.batch * d.H * K;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t bh = i / K, k = i - bh * K;
    const int64_t b = bh / d.H, h = bh - b * d.H;
    const int64_t n = 2 * k, src0 = (h / per) * d.N + n;
    float phi = 0.0f;
    for (int64_t t = 0; t < d.L; t++) {
      const int64_t row = b * d.L + t, at = row * d.H + h;
      phi = fmaf(delta[bh * d.L + t], to_f32(theta[at * K + k]), phi);
      float sn, cs;
      sincosf(phi, &sn, &cs);
      // The biases are read here, not kept in registers across the loop: sincosf's path for
      // large angles would then spill one of them.
      const float b0 = to_f32(Bm[row * d.bcs + src0]) + to_f32(b_bias[h * d.N + n]);
      const float b1 = to_f32(Bm[row * d.bcs + src0 + 1]) + to_f32(b_bias[h * d.N + n + 1]);
      const float c0 = to_f32(Cm[row * d.bcs + src0]) + to_f32(c_bias[h * d.N + n]);
      const float c1 = to_f32(Cm[row * d.bcs + src0 + 1]) + to_f32(c_bias[h * d.N + n + 1]);
      bbar[at * d.N + n] = fmaf(b0, cs, -(b1 * sn));
      bbar[at * d.N + n + 1] = fmaf(b0, sn, b1 * cs);
      cbar[at * d.N + n] = fmaf(c0, cs, -(c1 * sn));
      cbar[at * d.N + n + 1] = fmaf(c0, sn, c1 * cs);
      if (phis != nullptr) phis[at * K + k] = phi;
    }
  }
}

/** Launches the prep and turn kernels: w, bbar and cbar (and phis when rotating and given) for the call's inputs. */
template <typename T>
void launch_mamba3_inputs(const char* name, cudaStream_t stream, const T* dt_raw, const T* lambda_raw, const T* theta, const T* Bm, const T* Cm,
                          const T* b_bias, const T* c_bias, const T* dt_bias, const T* a_log, const Mamba3Tokens& w, float* bbar, float* cbar, float* phis,
                          const SsdDims& d) {
  launch(name, mamba3_prep_kernel<T>, grid_stride_blocks(d.batch * d.H * d.chunks, kThreads), kThreads, 0, stream, dt_raw, lambda_raw, dt_bias, a_log, w, d);
  const float* delta = w.delta;
  if (theta != nullptr) {
    launch(name, mamba3_turn_kernel<T, true>, grid_stride_blocks(d.batch * d.H * (d.N / 2), kThreads), kThreads, 0, stream, Bm, Cm, theta, b_bias, c_bias,
           delta, bbar, cbar, phis, d);
  } else {
    launch(name, mamba3_turn_kernel<T, false>, grid_stride_blocks(d.batch * d.L * d.H * d.N, kThreads), kThreads, 0, stream, Bm, Cm, theta, b_bias, c_bias,
           delta, bbar, cbar, phis, d);
  }
}

}  // namespace
}  // namespace kiln
