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
//     y         ssd_y_kernel (ssd_y.h) on B̄ and C̄ with the weights wo and wd: block per (8
//               tokens t of a chunk, b·h), C̄_t·B̄_s (a warp per s), S C̄_t (a warp per row of
//               S), then a thread per (t, p) sums y_t above
//   backward: see mamba3_backward.cu.
// Every sum runs in a fixed order and no kernel uses atomics: the same bits on every call.
#include "mamba3_scan.h"
#include "ssd_y.h"

namespace kiln {
namespace {

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
    launch_chunk_states<true>(name, c.stream, x, static_cast<const float*>(bbar), w.wo, w.lam, states, per_head_rows(d));
    over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
      launch(name, ssd_y_kernel<T, float, true>, dim3(static_cast<unsigned>(d.chunks * ((d.Q + kYTile - 1) / kYTile)), rows), kThreads, 0, c.stream, x,
             static_cast<const float*>(bbar), static_cast<const float*>(cbar), c.ptr<const T>(10), static_cast<const float*>(states),
             static_cast<const float*>(w.lam), static_cast<const float*>(w.wo), static_cast<const float*>(w.wd), c.ptr<T>(11), s);
    });
  });
}

}  // namespace

KILN_REGISTER_KERNEL("mamba3ScanForward", launch_mamba3_forward);

}  // namespace kiln
