// ssd_token_tile.h: the first half of the backward token kernels of both scans
// (ssd_backward.cu for Mamba2, mamba3_backward.cu for Mamba3, which reads its turned rows
// B̄ and C̄ in place of B and C). A block takes kTile tokens s_j = ta + j of one chunk
// [t0, t1) of one b·h and gathers in dynamic shared memory what both compute their
// gradients from, S and dS being the state entering the chunk and its adjoint:
//   per token j (N each)  bs = B_s, cs = C_s, gb = dSᵀ x_s, gc = Sᵀ dy_s
//   per token j (P each)  xs = x_s, dys = dy_s, gx = dS B_s
//   per token j, over the chunk's tokens k (Q each)
//     k ≥ s_j  col_cb = C_k·B_s, col_dyx = dy_k·x_s, col_e = exp(Λ_k − Λ_s)
//     k ≤ s_j  row_cb = C_s·B_k, row_dyx = dy_s·x_k, row_e = exp(Λ_s − Λ_k)
//   red (kThreads)  each thread's part of <dS, S>, in the chunk's last tile only
// Each row of S and dS is read once per tile; the sums run in a fixed order.
#pragma once
#include "ssd_scan.h"

namespace kiln {
namespace {

constexpr int kSmallTile = 4, kLargeTile = 8;  // tokens per block (kLargeTile when its shared memory fits)
constexpr size_t kMaxSharedBytes = 99 * 1024;  // dynamic shared memory every arch of the build grants a block (sm_86/89/120)

/** Floats of dynamic shared memory the token tile takes for `tile` tokens. */
__host__ __device__ __forceinline__ int64_t ssd_token_smem_floats(const SsdDims& d, int tile) { return tile * (4 * d.N + 3 * d.P + 6 * d.Q) + kThreads; }

/** The tile's arrays in dynamic shared memory, in the order of the file's head (token j's row of an array at j·N, j·P or j·Q). */
template <int kTile>
struct SsdTokenTile {
  float *bs, *cs, *gb, *gc, *xs, *dys, *gx, *col_cb, *col_dyx, *col_e, *row_cb, *row_dyx, *row_e, *red;
  __device__ SsdTokenTile(float* smem, const SsdDims& d) {
    bs = smem;
    cs = bs + kTile * d.N;
    gb = cs + kTile * d.N;
    gc = gb + kTile * d.N;
    xs = gc + kTile * d.N;
    dys = xs + kTile * d.P;
    gx = dys + kTile * d.P;
    col_cb = gx + kTile * d.P;
    col_dyx = col_cb + kTile * d.Q;
    col_e = col_dyx + kTile * d.Q;
    row_cb = col_e + kTile * d.Q;
    row_dyx = row_cb + kTile * d.Q;
    row_e = row_dyx + kTile * d.Q;
    red = row_e + kTile * d.Q;
  }
};

/**
 * A warp's dot products of one chunk token's rows with the tile's: sums[j] = Σ_n bc[n] tn[j·N + n]
 * and sums[kTile + j] = Σ_p xy[p] tp[j·P + p], each summed over the warp by warp_sum_many.
 */
template <int kTile, typename V, typename T>
__device__ __forceinline__ void tile_dots(const V* bc, const float* tn, const T* xy, const float* tp, int64_t N, int64_t P, int lane, float (&sums)[2 * kTile]) {
#pragma unroll
  for (int j = 0; j < 2 * kTile; j++) sums[j] = 0.0f;
  for (int64_t n = lane; n < N; n += 32) {
    const float v = to_f32(bc[n]);
#pragma unroll
    for (int j = 0; j < kTile; j++) sums[j] = fmaf(v, tn[j * N + n], sums[j]);
  }
  for (int64_t p = lane; p < P; p += 32) {
    const float v = to_f32(xy[p]);
#pragma unroll
    for (int j = 0; j < kTile; j++) sums[kTile + j] = fmaf(v, tp[j * P + p], sums[kTile + j]);
  }
  warp_sum_many(sums);
}

/**
 * Fills the tile (see the file's head) and ends with __syncthreads. B and C (V: T or f32)
 * rows bc_stride apart, this head's at bc0; x rows d.xs apart; dy dense (B, L, H, P);
 * lr = Λ of this b·h (indexed by token); states and dstate (B, H, chunks, P, N).
 */
template <int kTile, typename T, typename V>
__device__ __forceinline__ void fill_token_tile(const SsdTokenTile<kTile>& m, const SsdTile& tl, const T* dy, const T* x, const V* Bm, const V* Cm,
                                                int64_t bc_stride, int64_t bc0, const float* lr, const float* states, const float* dstate, int64_t bh,
                                                const SsdDims& d) {
  const int64_t b = bh / d.H, h = bh - b * d.H;
  const int64_t N = d.N, P = d.P, Q = d.Q, t0 = tl.t0, t1 = tl.t1, ta = tl.ta, x0 = h * P;
  const int nt = static_cast<int>(tl.tb - ta);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int64_t i = tid; i < kTile * N; i += kThreads) {
    const int j = static_cast<int>(i / N);
    const int64_t n = i - j * N, row = b * d.L + ta + j;
    m.bs[i] = j < nt ? to_f32(Bm[row * bc_stride + bc0 + n]) : 0.0f;
    m.cs[i] = j < nt ? to_f32(Cm[row * bc_stride + bc0 + n]) : 0.0f;
  }
  for (int64_t i = tid; i < kTile * P; i += kThreads) {
    const int j = static_cast<int>(i / P);
    const int64_t p = i - j * P, row = b * d.L + ta + j;
    m.xs[i] = j < nt ? to_f32(x[row * d.xs + x0 + p]) : 0.0f;
    m.dys[i] = j < nt ? to_f32(dy[(row * d.H + h) * P + p]) : 0.0f;
  }
  __syncthreads();
  // The chunk's products that involve the tile's tokens: a warp per chunk token k; value
  // w of warp_sum_many is a C·B product for w < kTile, else the dy·x one, of token w % kTile.
  for (int64_t k = t0 + warp; k < t1; k += kWarps) {
    const int64_t rk = b * d.L + k;
    if (k >= ta) {  // k ≥ s_j for some j: C_k·B_s, dy_k·x_s
      float sums[2 * kTile];
      tile_dots<kTile>(Cm + rk * bc_stride + bc0, m.bs, dy + (rk * d.H + h) * P, m.xs, N, P, lane, sums);
      const int w = warp_sum_index<2 * kTile>(lane), j = w % kTile;
      if (warp_sum_writer<2 * kTile>(lane) && j < nt && ta + j <= k) {
        if (w < kTile) {
          m.col_cb[j * Q + (k - t0)] = sums[0];
          m.col_e[j * Q + (k - t0)] = expf(lr[k] - lr[ta + j]);
        } else {
          m.col_dyx[j * Q + (k - t0)] = sums[0];
        }
      }
    }
    if (k < tl.tb) {  // k ≤ s_j for some j: C_s·B_k, dy_s·x_k
      float sums[2 * kTile];
      tile_dots<kTile>(Bm + rk * bc_stride + bc0, m.cs, x + rk * d.xs + x0, m.dys, N, P, lane, sums);
      const int w = warp_sum_index<2 * kTile>(lane), j = w % kTile;
      if (warp_sum_writer<2 * kTile>(lane) && j < nt && k <= ta + j) {
        if (w < kTile) {
          m.row_cb[j * Q + (k - t0)] = sums[0];
          m.row_e[j * Q + (k - t0)] = expf(lr[ta + j] - lr[k]);
        } else {
          m.row_dyx[j * Q + (k - t0)] = sums[0];
        }
      }
    }
  }
  const float* S = states + (bh * d.chunks + tl.c) * d.PN();
  const float* dS = dstate + (bh * d.chunks + tl.c) * d.PN();
  // dS B_s: a warp per row p.
  for (int64_t p = warp; p < P; p += kWarps) {
    float a[kTile];
#pragma unroll
    for (int j = 0; j < kTile; j++) a[j] = 0.0f;
    for (int64_t n = lane; n < N; n += 32) {
      const float v = dS[p * N + n];
#pragma unroll
      for (int j = 0; j < kTile; j++) a[j] = fmaf(v, m.bs[j * N + n], a[j]);
    }
    warp_sum_many(a);
    const int j = warp_sum_index<kTile>(lane);
    if (warp_sum_writer<kTile>(lane) && j < nt) m.gx[j * P + p] = a[0];
  }
  // dSᵀ x_s and Sᵀ dy_s: a thread per column n.
  for (int64_t n = tid; n < N; n += kThreads) {
    float ab[kTile], ac[kTile];
#pragma unroll
    for (int j = 0; j < kTile; j++) ab[j] = ac[j] = 0.0f;
    for (int64_t p = 0; p < P; p++) {
      const float vs = dS[p * N + n], v = S[p * N + n];
#pragma unroll
      for (int j = 0; j < kTile; j++) {
        ab[j] = fmaf(vs, m.xs[j * P + p], ab[j]);
        ac[j] = fmaf(v, m.dys[j * P + p], ac[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kTile; j++) {
      m.gb[j * N + n] = ab[j];
      m.gc[j * N + n] = ac[j];
    }
  }
  // The chunk's last token collects exp(E) <dS, S>.
  if (tl.tb == t1) {
    float a = 0.0f;
    for (int64_t e = tid; e < d.PN(); e += kThreads) a = fmaf(dS[e], S[e], a);
    m.red[tid] = a;
  }
  __syncthreads();
}

/** Token j's dot products over the tile: r = x_s·(dS B_s), dd = dy_s·x_s, u = C_s·(Sᵀ dy_s). */
template <int kTile>
__device__ __forceinline__ void tile_token_dots(const SsdTokenTile<kTile>& m, int j, const SsdDims& d, float& r, float& dd, float& u) {
  r = dd = u = 0.0f;
  for (int64_t p = 0; p < d.P; p++) {
    r = fmaf(m.xs[j * d.P + p], m.gx[j * d.P + p], r);
    dd = fmaf(m.dys[j * d.P + p], m.xs[j * d.P + p], dd);
  }
  for (int64_t n = 0; n < d.N; n++) u = fmaf(m.cs[j * d.N + n], m.gc[j * d.N + n], u);
}

/** <dS, S> from the threads' parts in red, in thread order. */
template <int kTile>
__device__ __forceinline__ float tile_state_dot(const SsdTokenTile<kTile>& m) {
  float ss = 0.0f;
  for (int i = 0; i < kThreads; i++) ss += m.red[i];
  return ss;
}

/**
 * Launches a token kernel over the b·h slices with its shared memory: `large` (kLargeTile
 * tokens a block) when that fits kMaxSharedBytes, else `small`; args, then the slice's dims.
 */
template <typename K, typename... Args>
void launch_token_kernel(const char* name, cudaStream_t stream, K large, K small, const SsdDims& d, Args... args) {
  const bool fits = sizeof(float) * elems(ssd_token_smem_floats(d, kLargeTile)) <= kMaxSharedBytes;
  const int tile = fits ? kLargeTile : kSmallTile;
  const K kernel = fits ? large : small;
  const size_t smem = sizeof(float) * elems(ssd_token_smem_floats(d, tile));
  allow_shared(kernel, smem);
  over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
    launch(name, kernel, dim3(static_cast<unsigned>(d.chunks * ((d.Q + tile - 1) / tile)), rows), kThreads, smem, stream, args..., s);
  });
}

}  // namespace
}  // namespace kiln
