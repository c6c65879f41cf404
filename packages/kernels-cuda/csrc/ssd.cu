// ssd.cu: ssdScanForward (ssd_backward.cu: ssdScanBackward; ssd_scan.h what they share),
// Mamba2's selective state space scan (state space duality), computed by chunks of Q
// tokens, f32 sums for every dtype.
// Per batch b and head h (group g shares B and C), dt_t = softplus(dtRaw + dtBias[h]),
// A = -exp(aLog[h]), Λ_t the running sum of dt·A inside t's chunk (E_c its last value):
//   forward
//     prep       one thread per (b, h, chunk): dt_t and Λ_t into f32 scratch
//     contrib    block (chunk c, b·h, 256 state elements): Σ_s exp(E_c − Λ_s) dt_s x_s B_sᵀ
//                written to states[c+1] (the chunks in parallel)
//     carry      one thread per (b, h, state element): states[0] = 0,
//                states[c] = exp(E_{c−1}) states[c−1] + contribution, chunks in order
//     y          block per (8 tokens t of a chunk, b·h): C_t·B_s for the chunk's s ≤ t (a
//                warp per s), S C_t (a warp per row of the entry state S), then a thread
//                per (t, p): y_t = D x_t + exp(Λ_t) S C_t + Σ_s exp(Λ_t − Λ_s) (C_t·B_s) dt_s x_s
//   backward (dS_c: the adjoint of the state leaving chunk c, zero for the last chunk)
//     prep, then contrib/carry mirrored: dS_{c−1} = exp(E_c) dS_c + Σ_{t∈c} exp(Λ_t) dy_t C_tᵀ
//     token      block per (8 tokens s of a chunk, or 4 when 8 do not fit 99 KiB of shared
//                memory; b·h): the chunk's C·B and dy·x products that involve s (a warp
//                per chunk token), dS B_s (a warp per row), dSᵀ x_s and Sᵀ dy_s (a thread
//                per state column), each row of S and dS read once per tile; writes dX,
//                this head's shares of dB_s and dC_s (f32 scratch), and s's scalars (dt
//                gradient before the decay term, the gradient of Λ_s, the state term
//                handed to the chunk's last token, dy·x)
//     chunk      one thread per (b, h, chunk): the reverse running sum of dΛ, dDt (with
//                softplus' derivative), f32 partials of dDtBias, dA and dD per chunk
//     params     one thread per head: partials summed over (batch, chunk) in order, added once
//     groups     one thread per (row, group, n): dB and dC, the group's heads summed in order
// Every sum runs in a fixed order and no kernel uses atomics: the same bits on every call.
#include "ssd_scan.h"

namespace kiln {
namespace {

constexpr int kMaxP = 256;  // SSD_MAX_HEAD_DIM in @kiln/contract
constexpr int kMaxN = 256;  // SSD_MAX_STATE_SIZE
constexpr int kYTile = 8;   // tokens per block of y

/**
 * Block (kYTile tokens of one chunk, b·h): y (see the file's head). Each row of B and of the
 * entry state S is read once for the tile's tokens.
 */
template <typename T>
__global__ void __launch_bounds__(kThreads) ssd_y_kernel(const T* x, const T* Bm, const T* Cm, const T* Dv, const float* states, const float* dtv,
                                                          const float* lam, T* y, SsdDims d) {
  __shared__ float cs[kYTile][kMaxN];
  __shared__ float coef[kYTile][kMaxQ];
  __shared__ float sc[kYTile][kMaxP];
  const SsdTile tl(d, blockIdx.x, kYTile);
  if (tl.ta >= tl.t1) return;
  const int64_t bh = d.bh0 + blockIdx.y;
  const int64_t b = bh / d.H, h = bh - b * d.H, g = h / (d.H / d.G);
  const int nt = static_cast<int>(tl.tb - tl.ta);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* lr = lam + bh * d.L;
  const float* dr = dtv + bh * d.L;
  for (int64_t i = tid; i < kYTile * d.N; i += kThreads) {
    const int j = static_cast<int>(i / d.N);
    const int64_t n = i - j * d.N;
    cs[j][n] = j < nt ? to_f32(Cm[(b * d.L + tl.ta + j) * d.bcs + g * d.N + n]) : 0.0f;
  }
  __syncthreads();
  // C_t·B_s for the tile's tokens t and the chunk's s up to the tile's last token: a warp per s.
  for (int64_t s = tl.t0 + warp; s < tl.tb; s += kWarps) {
    const T* brow = Bm + (b * d.L + s) * d.bcs + g * d.N;
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
      coef[j][s - tl.t0] = s <= t ? expf(lr[t] - lr[s]) * a[0] * dr[s] : 0.0f;
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

// ssdScanForward: x, dt, dtBias, aLog, B, C, D, y, states | batch, seqLen, heads, headDim, groups, stateSize, chunkSize,
//                 xRowStride, dtRowStride, bcRowStride, dtype
void launch_ssd_forward(const KernelCall& c) {
  const char* name = "ssdScanForward";
  const SsdDims d = dims_of(c, 9);
  const int64_t bhl = d.batch * d.H * d.L;
  float* dtv = static_cast<float*>(c.scratch(sizeof(float) * 2 * padded(bhl)));
  float* lam = dtv + padded(bhl);
  float* states = c.ptr<float>(8);
  dispatch_float(c.i32(19), name, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.ptr<const T>(0);
    const T* Bm = c.ptr<const T>(4);
    launch(name, ssd_prep_kernel<T>, grid_stride_blocks(d.batch * d.H * d.chunks, kThreads), kThreads, 0, c.stream, c.ptr<const T>(1), c.ptr<const T>(2),
           c.ptr<const T>(3), dtv, lam, d);
    if (d.chunks > 1) {
      over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
        launch(name, ssd_chunk_outer_kernel<T, true>, dim3(static_cast<unsigned>(d.chunks - 1), rows, ceil_div(elems(d.PN()), kThreads)), kThreads, 0,
               c.stream, x, Bm, static_cast<const float*>(dtv), static_cast<const float*>(lam), states, s);
      });
    }
    launch(name, ssd_carry_kernel<true>, grid_stride_blocks(d.batch * d.H * d.PN(), kThreads), kThreads, 0, c.stream, states, static_cast<const float*>(lam), d);
    over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
      launch(name, ssd_y_kernel<T>, dim3(static_cast<unsigned>(d.chunks * ((d.Q + kYTile - 1) / kYTile)), rows), kThreads, 0, c.stream, x, Bm,
             c.ptr<const T>(5), c.ptr<const T>(6), static_cast<const float*>(states), static_cast<const float*>(dtv), static_cast<const float*>(lam), c.ptr<T>(7), s);
    });
  });
}

}  // namespace

KILN_REGISTER_KERNEL("ssdScanForward", launch_ssd_forward);

}  // namespace kiln
