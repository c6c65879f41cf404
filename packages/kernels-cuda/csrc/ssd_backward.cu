// ssd_backward.cu: ssdScanBackward, the selective scan's backward (see ssd.cu for the
// math and the kernels): the adjoint of the state carried across chunks, the per-token
// gradients by tiles of tokens, dDt through the reverse running sum of dΛ, dB and dC
// summed over the group's heads and the parameter gradients from partials, in order.
// dDtBias, dALog and dD are in gradDtype (the inputs' dtype, or f32 with 16-bit inputs);
// every other gradient is in the inputs' dtype.
#include "ssd_scan.h"

namespace kiln {
namespace {

constexpr int kSmallTile = 4, kLargeTile = 8;  // tokens per block (kLargeTile when its shared memory fits)
constexpr size_t kMaxSharedBytes = 99 * 1024;  // dynamic shared memory every arch of the build grants a block (sm_86/89/120)

/** Per-token scratch of the backward: f32, indexed bh*L + s. */
struct SsdTokenScratch {
  float* ddt;   // dt gradient before the A·dl term
  float* dlam;  // gradient of Λ_s (all but the state terms the chunk's last token collects)
  float* q;     // exp(E − Λ_s) dt_s x_sᵀ dS B_s: added to the last token's dΛ, taken from s's
  float* dd;    // dy_s · x_s
  float* dbh;   // (B, L, H, N) this head's share of dB
  float* dch;   // (B, L, H, N) this head's share of dC
};

/** Floats of dynamic shared memory the backward token kernel takes for `tile` tokens. */
__host__ __device__ __forceinline__ int64_t ssd_token_smem_floats(const SsdDims& d, int tile) { return tile * (4 * d.N + 3 * d.P + 6 * d.Q) + kThreads; }

/**
 * Block (kTile tokens of one chunk, b·h): see the head of ssd.cu. Dynamic shared memory, per
 * token j of the tile (s_j = ta + j): B, C, dSᵀ x, Sᵀ dy (N each), x, dy, dS B (P each), and
 * over the chunk's tokens k: C_k·B_s, dy_k·x_s, exp(Λ_k − Λ_s) (k ≥ s_j) and C_s·B_k,
 * dy_s·x_k, exp(Λ_s − Λ_k) (k ≤ s_j); then kThreads floats for <dS, S>.
 */
template <typename T, int kTile>
__global__ void __launch_bounds__(kThreads) ssd_token_backward_kernel(const T* dy, const T* x, const T* Bm, const T* Cm, const T* Dv, const float* states,
                                                                      const float* dstate, const float* dtv, const float* lam, T* dx, SsdTokenScratch o,
                                                                      SsdDims d) {
  KILN_DYNAMIC_SHARED(float, smem);
  const SsdTile tl(d, blockIdx.x, kTile);
  if (tl.ta >= tl.t1) return;
  const int64_t N = d.N, P = d.P, Q = d.Q;
  float* bs = smem;
  float* cs = bs + kTile * N;
  float* gb = cs + kTile * N;
  float* gc = gb + kTile * N;
  float* xs = gc + kTile * N;
  float* dys = xs + kTile * P;
  float* gx = dys + kTile * P;
  float* col_cb = gx + kTile * P;
  float* col_dyx = col_cb + kTile * Q;
  float* col_e = col_dyx + kTile * Q;
  float* row_cb = col_e + kTile * Q;
  float* row_dyx = row_cb + kTile * Q;
  float* row_e = row_dyx + kTile * Q;
  float* red = row_e + kTile * Q;
  const int64_t bh = d.bh0 + blockIdx.y;
  const int64_t b = bh / d.H, h = bh - b * d.H, g = h / (d.H / d.G);
  const int64_t t0 = tl.t0, t1 = tl.t1, ta = tl.ta;
  const int nt = static_cast<int>(tl.tb - ta);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* lr = lam + bh * d.L;
  const float* dr = dtv + bh * d.L;
  const int64_t bc0 = g * N, x0 = h * P;
  const float E = lr[t1 - 1];
  for (int64_t i = tid; i < kTile * N; i += kThreads) {
    const int j = static_cast<int>(i / N);
    const int64_t n = i - j * N, row = b * d.L + ta + j;
    bs[i] = j < nt ? to_f32(Bm[row * d.bcs + bc0 + n]) : 0.0f;
    cs[i] = j < nt ? to_f32(Cm[row * d.bcs + bc0 + n]) : 0.0f;
  }
  for (int64_t i = tid; i < kTile * P; i += kThreads) {
    const int j = static_cast<int>(i / P);
    const int64_t p = i - j * P, row = b * d.L + ta + j;
    xs[i] = j < nt ? to_f32(x[row * d.xs + x0 + p]) : 0.0f;
    dys[i] = j < nt ? to_f32(dy[(row * d.H + h) * P + p]) : 0.0f;
  }
  __syncthreads();
  // The chunk's products that involve the tile's tokens: a warp per chunk token k.
  for (int64_t k = t0 + warp; k < t1; k += kWarps) {
    const int64_t rk = b * d.L + k;
    if (k >= ta) {  // k ≥ s_j for some j: C_k·B_s, dy_k·x_s
      const T* crow = Cm + rk * d.bcs + bc0;
      const T* dyrow = dy + (rk * d.H + h) * P;
      float sums[2 * kTile];  // C_k·B_s for the tile's tokens, then dy_k·x_s
#pragma unroll
      for (int j = 0; j < 2 * kTile; j++) sums[j] = 0.0f;
      for (int64_t n = lane; n < N; n += 32) {
        const float v = to_f32(crow[n]);
#pragma unroll
        for (int j = 0; j < kTile; j++) sums[j] = fmaf(v, bs[j * N + n], sums[j]);
      }
      for (int64_t p = lane; p < P; p += 32) {
        const float v = to_f32(dyrow[p]);
#pragma unroll
        for (int j = 0; j < kTile; j++) sums[kTile + j] = fmaf(v, xs[j * P + p], sums[kTile + j]);
      }
      warp_sum_many(sums);
      const int w = warp_sum_index<2 * kTile>(lane), j = w % kTile;
      if (warp_sum_writer<2 * kTile>(lane) && j < nt && ta + j <= k) {
        if (w < kTile) {
          col_cb[j * Q + (k - t0)] = sums[0];
          col_e[j * Q + (k - t0)] = expf(lr[k] - lr[ta + j]);
        } else {
          col_dyx[j * Q + (k - t0)] = sums[0];
        }
      }
    }
    if (k < tl.tb) {  // k ≤ s_j for some j: C_s·B_k, dy_s·x_k
      const T* brow = Bm + rk * d.bcs + bc0;
      const T* xrow = x + rk * d.xs + x0;
      float sums[2 * kTile];  // C_s·B_k for the tile's tokens, then dy_s·x_k
#pragma unroll
      for (int j = 0; j < 2 * kTile; j++) sums[j] = 0.0f;
      for (int64_t n = lane; n < N; n += 32) {
        const float v = to_f32(brow[n]);
#pragma unroll
        for (int j = 0; j < kTile; j++) sums[j] = fmaf(cs[j * N + n], v, sums[j]);
      }
      for (int64_t p = lane; p < P; p += 32) {
        const float v = to_f32(xrow[p]);
#pragma unroll
        for (int j = 0; j < kTile; j++) sums[kTile + j] = fmaf(dys[j * P + p], v, sums[kTile + j]);
      }
      warp_sum_many(sums);
      const int w = warp_sum_index<2 * kTile>(lane), j = w % kTile;
      if (warp_sum_writer<2 * kTile>(lane) && j < nt && k <= ta + j) {
        if (w < kTile) {
          row_cb[j * Q + (k - t0)] = sums[0];
          row_e[j * Q + (k - t0)] = expf(lr[ta + j] - lr[k]);
        } else {
          row_dyx[j * Q + (k - t0)] = sums[0];
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
      for (int j = 0; j < kTile; j++) a[j] = fmaf(v, bs[j * N + n], a[j]);
    }
    warp_sum_many(a);
    const int j = warp_sum_index<kTile>(lane);
    if (warp_sum_writer<kTile>(lane) && j < nt) gx[j * P + p] = a[0];
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
        ab[j] = fmaf(vs, xs[j * P + p], ab[j]);
        ac[j] = fmaf(v, dys[j * P + p], ac[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kTile; j++) {
      gb[j * N + n] = ab[j];
      gc[j * N + n] = ac[j];
    }
  }
  // The chunk's last token collects exp(E) <dS, S>.
  const bool last = tl.tb == t1;
  if (last) {
    float a = 0.0f;
    for (int64_t e = tid; e < d.PN(); e += kThreads) a = fmaf(dS[e], S[e], a);
    red[tid] = a;
  }
  __syncthreads();
  // A thread per (token, n): this head's shares of dB_s and dC_s.
  for (int64_t i = tid; i < nt * N; i += kThreads) {
    const int j = static_cast<int>(i / N);
    const int64_t n = i - j * N, s = ta + j, row = b * d.L + s;
    float db = 0.0f, dc = 0.0f;
    for (int64_t t = s; t < t1; t++) db = fmaf(col_e[j * Q + (t - t0)] * col_dyx[j * Q + (t - t0)], to_f32(Cm[(b * d.L + t) * d.bcs + bc0 + n]), db);
    for (int64_t k = t0; k <= s; k++) dc = fmaf(row_e[j * Q + (k - t0)] * row_dyx[j * Q + (k - t0)] * dr[k], to_f32(Bm[(b * d.L + k) * d.bcs + bc0 + n]), dc);
    o.dbh[(row * d.H + h) * N + n] = dr[s] * (db + expf(E - lr[s]) * gb[i]);
    o.dch[(row * d.H + h) * N + n] = expf(lr[s]) * gc[i] + dc;
  }
  // A thread per (token, p): dx_s.
  const float D = to_f32(Dv[h]);
  for (int64_t i = tid; i < nt * P; i += kThreads) {
    const int j = static_cast<int>(i / P);
    const int64_t p = i - j * P, s = ta + j, row = b * d.L + s;
    float a = 0.0f;
    for (int64_t t = s; t < t1; t++) a = fmaf(col_e[j * Q + (t - t0)] * col_cb[j * Q + (t - t0)], to_f32(dy[((b * d.L + t) * d.H + h) * P + p]), a);
    dx[row * d.xs + x0 + p] = from_f32<T>(D * dys[i] + dr[s] * (a + expf(E - lr[s]) * gx[i]));
  }
  // A thread per token: its scalars.
  if (tid >= nt) return;
  const int j = tid;
  const int64_t s = ta + j;
  const float ls = lr[s], es = expf(E - ls), dts = dr[s];
  float r = 0.0f, dd = 0.0f, u = 0.0f;
  for (int64_t p = 0; p < P; p++) {
    r = fmaf(xs[j * P + p], gx[j * P + p], r);
    dd = fmaf(dys[j * P + p], xs[j * P + p], dd);
  }
  for (int64_t n = 0; n < N; n++) u = fmaf(cs[j * N + n], gc[j * N + n], u);
  float mall = 0.0f, mstrict = 0.0f, intra = 0.0f;
  for (int64_t t = s; t < t1; t++) {
    const int64_t q = j * Q + (t - t0);
    const float m = col_e[q] * col_cb[q] * col_dyx[q];
    mall += m;
    if (t > s) mstrict += m;
  }
  for (int64_t k = t0; k < s; k++) {
    const int64_t q = j * Q + (k - t0);
    intra = fmaf(dr[k], row_e[q] * row_cb[q] * row_dyx[q], intra);
  }
  const float qs = es * dts * r;
  float dl = intra - dts * mstrict + expf(ls) * u - qs;
  if (s == t1 - 1) {
    float ss = 0.0f;
    for (int i = 0; i < kThreads; i++) ss += red[i];
    dl += expf(E) * ss;
  }
  const int64_t at = bh * d.L + s;
  o.ddt[at] = mall + es * r;
  o.dlam[at] = dl;
  o.q[at] = qs;
  o.dd[at] = dd;
}

/**
 * One thread per (b, h, chunk): dΛ's reverse running sum dl, ddt_s += A dl_s, dDt with
 * softplus' derivative; partials (h, b·chunks + c) of Σ dDt, Σ dt·dl (dA) and Σ dy·x.
 */
template <typename T>
__global__ void __launch_bounds__(kThreads) ssd_chunk_backward_kernel(const T* dt_raw, const T* dt_bias, const T* a_log, const float* dtv, SsdTokenScratch o,
                                                                      T* ddt_out, float* part, SsdDims d) {
  const int64_t total = d.batch * d.H * d.chunks;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t bh = i / d.chunks, c = i - bh * d.chunks;
    const int64_t b = bh / d.H, h = bh - b * d.H;
    const float A = -expf(to_f32(a_log[h]));
    const float bias = to_f32(dt_bias[h]);
    const int64_t t0 = c * d.Q, t1 = t0 + d.Q < d.L ? t0 + d.Q : d.L;
    float qsum = 0.0f;
    for (int64_t t = t0; t < t1; t++) qsum += o.q[bh * d.L + t];
    float dl = qsum, sdt = 0.0f, sa = 0.0f, sd = 0.0f;
    for (int64_t t = t1 - 1; t >= t0; t--) {
      const int64_t at = bh * d.L + t;
      dl += o.dlam[at];
      const float g = fmaf(A, dl, o.ddt[at]);
      sa = fmaf(dtv[at], dl, sa);
      const float v = to_f32(dt_raw[(b * d.L + t) * d.dts + h]) + bias;
      const float sig = v > 20.0f ? 1.0f : 1.0f / (1.0f + expf(-v));
      const float graw = g * sig;
      ddt_out[(b * d.L + t) * d.dts + h] = from_f32<T>(graw);
      sdt += graw;
      sd += o.dd[at];
    }
    const int64_t slot = h * d.batch * d.chunks + b * d.chunks + c;
    const int64_t stride = d.H * d.batch * d.chunks;
    part[slot] = sdt;
    part[stride + slot] = sa;
    part[2 * stride + slot] = sd;
  }
}

/** One thread per head: the partials summed over (batch, chunk) in order, added once (to G: T or f32). */
template <typename T, typename G>
__global__ void __launch_bounds__(kThreads) ssd_param_kernel(const float* part, const T* a_log, G* d_bias, G* d_alog, G* d_d, SsdDims d) {
  const int64_t h = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (h >= d.H) return;
  const int64_t per = d.batch * d.chunks, stride = d.H * per;
  float sdt = 0.0f, sa = 0.0f, sd = 0.0f;
  for (int64_t k = 0; k < per; k++) {
    sdt += part[h * per + k];
    sa += part[stride + h * per + k];
    sd += part[2 * stride + h * per + k];
  }
  const float A = -expf(to_f32(a_log[h]));
  d_bias[h] = from_f32<G>(to_f32(d_bias[h]) + sdt);
  d_alog[h] = from_f32<G>(to_f32(d_alog[h]) + A * sa);
  d_d[h] = from_f32<G>(to_f32(d_d[h]) + sd);
}

// ssdScanBackward: dY, x, dt, dtBias, aLog, B, C, D, states, dX, dDt, dB, dC, dDtBias, dALog, dD | batch, seqLen, heads,
//                  headDim, groups, stateSize, chunkSize, xRowStride, dtRowStride, bcRowStride, dtype, gradDtype
void launch_ssd_backward(const KernelCall& c) {
  const char* name = "ssdScanBackward";
  const SsdDims d = dims_of(c, 16);
  const int64_t bhl = d.batch * d.H * d.L;
  const int64_t nstate = d.batch * d.H * d.chunks * d.PN();
  const int64_t nshare = d.batch * d.L * d.H * d.N;
  const int64_t npart = 3 * d.H * d.batch * d.chunks;
  float* base = static_cast<float*>(c.scratch(sizeof(float) * (6 * padded(bhl) + padded(nstate) + 2 * padded(nshare) + padded(npart))));
  float* dtv = base;
  float* lam = dtv + padded(bhl);
  SsdTokenScratch o{};
  o.ddt = lam + padded(bhl);
  o.dlam = o.ddt + padded(bhl);
  o.q = o.dlam + padded(bhl);
  o.dd = o.q + padded(bhl);
  float* dstate = o.dd + padded(bhl);
  o.dbh = dstate + padded(nstate);
  o.dch = o.dbh + padded(nshare);
  float* part = o.dch + padded(nshare);
  dispatch_float_grad(c.i32(26), c.i32(27), name, [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    const T* dy = c.ptr<const T>(0);
    const T* x = c.ptr<const T>(1);
    const T* dt_raw = c.ptr<const T>(2);
    const T* dt_bias = c.ptr<const T>(3);
    const T* a_log = c.ptr<const T>(4);
    const T* Bm = c.ptr<const T>(5);
    const T* Cm = c.ptr<const T>(6);
    launch(name, ssd_prep_kernel<T>, grid_stride_blocks(d.batch * d.H * d.chunks, kThreads), kThreads, 0, c.stream, dt_raw, dt_bias, a_log, dtv, lam, d);
    if (d.chunks > 1) {
      over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
        launch(name, ssd_chunk_outer_kernel<T, false>, dim3(static_cast<unsigned>(d.chunks - 1), rows, ceil_div(elems(d.PN()), kThreads)), kThreads, 0,
               c.stream, dy, Cm, static_cast<const float*>(dtv), static_cast<const float*>(lam), dstate, s);
      });
    }
    launch(name, ssd_carry_kernel<false>, grid_stride_blocks(d.batch * d.H * d.PN(), kThreads), kThreads, 0, c.stream, dstate, static_cast<const float*>(lam), d);
    const auto token_kernel = [&](auto kernel, int tile) {
      allow_shared(kernel, sizeof(float) * elems(ssd_token_smem_floats(d, tile)));
      over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
        launch(name, kernel, dim3(static_cast<unsigned>(d.chunks * ((d.Q + tile - 1) / tile)), rows), kThreads,
               sizeof(float) * elems(ssd_token_smem_floats(d, tile)), c.stream, dy, x, Bm, Cm, c.ptr<const T>(7), c.ptr<const float>(8),
               static_cast<const float*>(dstate), static_cast<const float*>(dtv), static_cast<const float*>(lam), c.ptr<T>(9), o, s);
      });
    };
    if (sizeof(float) * elems(ssd_token_smem_floats(d, kLargeTile)) <= kMaxSharedBytes) token_kernel(ssd_token_backward_kernel<T, kLargeTile>, kLargeTile);
    else token_kernel(ssd_token_backward_kernel<T, kSmallTile>, kSmallTile);
    launch(name, ssd_chunk_backward_kernel<T>, grid_stride_blocks(d.batch * d.H * d.chunks, kThreads), kThreads, 0, c.stream, dt_raw, dt_bias, a_log,
           static_cast<const float*>(dtv), o, c.ptr<T>(10), part, d);
    launch(name, ssd_group_sum_kernel<T>, grid_stride_blocks(d.batch * d.L * d.G * d.N, kThreads), kThreads, 0, c.stream, static_cast<const float*>(o.dbh),
           static_cast<const float*>(o.dch), c.ptr<T>(11), c.ptr<T>(12), d);
    launch(name, ssd_param_kernel<T, G>, dim3(ceil_div(elems(d.H), kThreads)), kThreads, 0, c.stream, static_cast<const float*>(part), a_log, c.ptr<G>(13),
           c.ptr<G>(14), c.ptr<G>(15), d);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("ssdScanBackward", launch_ssd_backward);

}  // namespace kiln
