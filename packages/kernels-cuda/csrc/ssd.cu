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
//     y          (ssd_y.h) block per (8 tokens t of a chunk, b·h): C_t·B_s for the chunk's s ≤ t (a
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
#include "ssd_y.h"

namespace kiln {
namespace {

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
    launch_chunk_states<true>(name, c.stream, x, Bm, dtv, lam, states, d);
    over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
      launch(name, ssd_y_kernel<T, T, false>, dim3(static_cast<unsigned>(d.chunks * ((d.Q + kYTile - 1) / kYTile)), rows), kThreads, 0, c.stream, x, Bm,
             c.ptr<const T>(5), c.ptr<const T>(6), static_cast<const float*>(states), static_cast<const float*>(lam), static_cast<const float*>(dtv),
             static_cast<const float*>(nullptr), c.ptr<T>(7), s);
    });
  });
}

}  // namespace

KILN_REGISTER_KERNEL("ssdScanForward", launch_ssd_forward);

}  // namespace kiln
