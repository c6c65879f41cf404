// ssd_backward.cu: ssdScanBackward, the selective scan's backward (see ssd.cu for the
// math and the kernels): the adjoint of the state carried across chunks, the per-token
// gradients by tiles of tokens, dDt through the reverse running sum of dΛ, dB and dC
// summed over the group's heads and the parameter gradients from partials, in order.
// dDtBias, dALog and dD are in gradDtype (the inputs' dtype, or f32 with 16-bit inputs);
// every other gradient is in the inputs' dtype.
#include "ssd_token_tile.h"

namespace kiln {
namespace {

/** Per-token scratch of the backward: f32, indexed bh*L + s. */
struct SsdTokenScratch {
  float* ddt;   // dt gradient before the A·dl term
  float* dlam;  // gradient of Λ_s (all but the state terms the chunk's last token collects)
  float* q;     // exp(E − Λ_s) dt_s x_sᵀ dS B_s: added to the last token's dΛ, taken from s's
  float* dd;    // dy_s · x_s
  float* dbh;   // (B, L, H, N) this head's share of dB
  float* dch;   // (B, L, H, N) this head's share of dC
};

/**
 * Block (kTile tokens of one chunk, b·h): see the head of ssd.cu; the tile's products as
 * ssd_token_tile.h says, then this head's shares of dB_s and dC_s, dx_s and s's scalars.
 */
template <typename T, int kTile>
__global__ void __launch_bounds__(kThreads) ssd_token_backward_kernel(const T* dy, const T* x, const T* Bm, const T* Cm, const T* Dv, const float* states,
                                                                      const float* dstate, const float* dtv, const float* lam, T* dx, SsdTokenScratch o,
                                                                      SsdDims d) {
  KILN_DYNAMIC_SHARED(float, smem);
  const SsdTile tl(d, blockIdx.x, kTile);
  if (tl.ta >= tl.t1) return;
  const SsdTokenTile<kTile> m(smem, d);
  const int64_t N = d.N, P = d.P, Q = d.Q;
  const int64_t bh = d.bh0 + blockIdx.y;
  const int64_t b = bh / d.H, h = bh - b * d.H, g = h / (d.H / d.G);
  const int64_t t0 = tl.t0, t1 = tl.t1, ta = tl.ta;
  const int nt = static_cast<int>(tl.tb - ta);
  const int tid = threadIdx.x;
  const float* lr = lam + bh * d.L;
  const float* dr = dtv + bh * d.L;
  const int64_t bc0 = g * N, x0 = h * P;
  const float E = lr[t1 - 1];
  fill_token_tile(m, tl, dy, x, Bm, Cm, d.bcs, bc0, lr, states, dstate, bh, d);
  // A thread per (token, n): this head's shares of dB_s and dC_s.
  for (int64_t i = tid; i < nt * N; i += kThreads) {
    const int j = static_cast<int>(i / N);
    const int64_t n = i - j * N, s = ta + j, row = b * d.L + s;
    float db = 0.0f, dc = 0.0f;
    for (int64_t t = s; t < t1; t++) db = fmaf(m.col_e[j * Q + (t - t0)] * m.col_dyx[j * Q + (t - t0)], to_f32(Cm[(b * d.L + t) * d.bcs + bc0 + n]), db);
    for (int64_t k = t0; k <= s; k++) dc = fmaf(m.row_e[j * Q + (k - t0)] * m.row_dyx[j * Q + (k - t0)] * dr[k], to_f32(Bm[(b * d.L + k) * d.bcs + bc0 + n]), dc);
    o.dbh[(row * d.H + h) * N + n] = dr[s] * (db + expf(E - lr[s]) * m.gb[i]);
    o.dch[(row * d.H + h) * N + n] = expf(lr[s]) * m.gc[i] + dc;
  }
  // A thread per (token, p): dx_s.
  const float D = to_f32(Dv[h]);
  for (int64_t i = tid; i < nt * P; i += kThreads) {
    const int j = static_cast<int>(i / P);
    const int64_t p = i - j * P, s = ta + j, row = b * d.L + s;
    float a = 0.0f;
    for (int64_t t = s; t < t1; t++) a = fmaf(m.col_e[j * Q + (t - t0)] * m.col_cb[j * Q + (t - t0)], to_f32(dy[((b * d.L + t) * d.H + h) * P + p]), a);
    dx[row * d.xs + x0 + p] = from_f32<T>(D * m.dys[i] + dr[s] * (a + expf(E - lr[s]) * m.gx[i]));
  }
  // A thread per token: its scalars.
  if (tid >= nt) return;
  const int j = tid;
  const int64_t s = ta + j;
  const float ls = lr[s], es = expf(E - ls), dts = dr[s];
  float r, dd, u;
  tile_token_dots(m, j, d, r, dd, u);
  float mall = 0.0f, mstrict = 0.0f, intra = 0.0f;
  for (int64_t t = s; t < t1; t++) {
    const int64_t q = j * Q + (t - t0);
    const float mt = m.col_e[q] * m.col_cb[q] * m.col_dyx[q];
    mall += mt;
    if (t > s) mstrict += mt;
  }
  for (int64_t k = t0; k < s; k++) {
    const int64_t q = j * Q + (k - t0);
    intra = fmaf(dr[k], m.row_e[q] * m.row_cb[q] * m.row_dyx[q], intra);
  }
  const float qs = es * dts * r;
  float dl = intra - dts * mstrict + expf(ls) * u - qs;
  if (s == t1 - 1) dl += expf(E) * tile_state_dot(m);
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
    const SsdChunk ch(d, i, a_log, dt_bias);
    float qsum = 0.0f;
    for (int64_t t = ch.t0; t < ch.t1; t++) qsum += o.q[ch.bh * d.L + t];
    float dl = qsum, sdt = 0.0f, sa = 0.0f, sd = 0.0f;
    for (int64_t t = ch.t1 - 1; t >= ch.t0; t--) {
      const int64_t at = ch.bh * d.L + t, row = ch.b * d.L + t;
      dl += o.dlam[at];
      const float g = fmaf(ch.A, dl, o.ddt[at]);
      sa = fmaf(dtv[at], dl, sa);
      const float v = to_f32(dt_raw[row * d.dts + ch.h]) + ch.bias;
      const float sig = v > 20.0f ? 1.0f : 1.0f / (1.0f + expf(-v));
      const float graw = g * sig;
      ddt_out[row * d.dts + ch.h] = from_f32<T>(graw);
      sdt += graw;
      sd += o.dd[at];
    }
    store_param_partials(part, d, ch, sdt, sa, sd);
  }
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
    launch_chunk_states<false>(name, c.stream, dy, Cm, dtv, lam, dstate, d);
    launch_token_kernel(name, c.stream, ssd_token_backward_kernel<T, kLargeTile>, ssd_token_backward_kernel<T, kSmallTile>, d, dy, x, Bm, Cm,
                        c.ptr<const T>(7), c.ptr<const float>(8), static_cast<const float*>(dstate), static_cast<const float*>(dtv),
                        static_cast<const float*>(lam), c.ptr<T>(9), o);
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
