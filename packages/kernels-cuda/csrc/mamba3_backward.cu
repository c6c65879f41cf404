// mamba3_backward.cu: mamba3ScanBackward, the Mamba3 scan's backward (mamba3.cu has the
// math and the forward). With dS the adjoint of the state leaving a chunk (zero for the
// last), W1[t][s] = exp(Λ_t − Λ_s) C̄_t·B̄_s, W2[t][s] = exp(Λ_t − Λ_s) dy_t·x_s and
// eE_s = exp(Λ_E − Λ_s), inside a chunk:
//   dx_s  = D dy_s + wo_s [Σ_{t>s} W1[t][s] dy_t + eE_s dS B̄_s] + wd_s W1[s][s] dy_s
//   dB̄_s  = wo_s [Σ_{t>s} W2[t][s] C̄_t + eE_s dSᵀ x_s] + wd_s W2[s][s] C̄_s
//   dC̄_t  = exp(Λ_t) Sᵀ dy_t + Σ_{s<t} W2[t][s] wo_s B̄_s + wd_t W2[t][t] B̄_t
//   dwo_s = Σ_{t>s} W1[t][s] (dy_t·x_s) + eE_s x_sᵀ dS B̄_s,  dwd_s = W1[s][s] (dy_s·x_s)
//   dΛ as in ssd_backward.cu with dt_s replaced by wo_s; dΔ_s += A Σ_{k≥s in chunk} dΛ_k
//   dΔ_s += λ_s (dwo_s + dwd_s) + (1 − λ_s) dwo_{s−1},  dλ_s = Δ_s (dwo_s + dwd_s − dwo_{s−1})
//   rotation: Φ_{t,k} = Σ_{u≥t} dφ_{u,k} (the adjoint of turning every token from t on by one
//   more angle in pair k), dθ_t = Δ_t Φ_t, dΔ_t += Σ_k θ_{t,k} Φ_{t,k}, dB̂ = R(−φ_t) dB̄ (dĈ
//   likewise). Turning all tokens together changes nothing, so Φ_t sums only what crosses the
//   line before t: with cross(a, b) = a_{2k} b_{2k+1} − a_{2k+1} b_{2k}, for t in chunk c
//     Φ_t = exp(E) Σ_p cross(dS[p], S[p]) + Σ_{u≥t} exp(Λ_u) cross(C̄_u, Sᵀ dy_u)
//         + Σ_{s<t} eE_s wo_s cross(dSᵀ x_s, B̄_s) + Σ_{s<t≤u} W2[u][s] wo_s cross(C̄_u, B̄_s)
//   (the tokens u, s of the chunk). Summing the dφ_u instead cancels large terms where a Δ
//   past 20 clears the state (Φ_t = 0 there), leaving f32 rounding that Δ_t then scales.
//   The last (pair) sum is Σ_{s<t} (A_s − R_s), A_s the sum of s's terms with later tokens,
//   R_s that with earlier ones, each term computed once per side with the same operations
//   and summed in f64, so that the pairs on one side of t cancel exactly.
//   dB = Σ_{heads of the group} dB̂, dBBias[h] += Σ_{b,t} dB̂ (C likewise)
//   dS_{c−1} = exp(E_c) dS_c + Σ_{t∈c} exp(Λ_t) dy_t C̄_tᵀ
// Kernels, in order:
//   prep, turn   as the forward's (mamba3_scan.h); turn keeps the angles φ
//   contrib, carry  ssd_chunk_outer_kernel / ssd_carry_kernel on C̄ in reverse: dS
//   token        block per (8 tokens s of a chunk, or 4 when 8 do not fit 99 KiB of shared
//                memory; b·h): ssd_token_tile.h's products on B̄ and C̄, then dX, this
//                head's dB̄_s and dC̄_s (f32 scratch), s's scalars (dwo, dwd, dΛ, the state
//                term q handed to the chunk's last token, dy·x) and, with theta, s's parts
//                of Φ per pair (the pair sum A_s − R_s in f64) and, in the chunk's last
//                tile, its state part
//   unturn       with theta, one thread per (b, h, chunk, pair): Φ (the suffix and prefix
//                sums in token order), dθ, θ·Φ (f32 scratch), dB̄ and dC̄ turned back in place
//                to dB̂ and dĈ
//   chunk        one thread per (b, h, chunk): dΛ's reverse running sum, dDt (softplus'
//                derivative) and dLambda (sigmoid's), f32 partials of dDtBias, dA and dD
//   groups       ssd_group_sum_kernel: dB and dC, the group's heads summed in order
//   bias         one thread per (b, chunk, h, n): partial rows of dBBias and dCBias, then
//                sum_chunk_partials_kernel (chunk_partials.h) adds them in order, once
//   params       ssd_param_kernel: the scalar partials summed over (batch, chunk) in order
// dBBias, dCBias, dDtBias, dALog and dD are in gradDtype (the inputs' dtype, or f32 with
// 16-bit inputs); every other gradient is in the inputs' dtype. No atomics: the same bits on
// every call.
#include "chunk_partials.h"
#include "mamba3_scan.h"
#include "ssd_token_tile.h"

namespace kiln {
namespace {

/** Per-token scratch of the backward: f32, scalars indexed bh*L + s, rows (B, L, H, N). */
struct Mamba3TokenScratch {
  float* dwo;   // gradient of wo_s
  float* dwd;   // gradient of wd_s
  float* dlam;  // gradient of Λ_s (all but the state terms the chunk's last token collects)
  float* q;     // eE_s wo_s x_sᵀ dS B̄_s: added to the last token's dΛ, taken from s's
  float* dd;    // dy_s · x_s
  float* dbh;   // this head's dB̄ (dB̂ after the unturn kernel)
  float* dch;   // this head's dC̄ (dĈ after it)
};

/** The parts of Φ (see the file's head), with theta; null pointers without. (B, L, H, K) unless said. */
struct Mamba3AngleScratch {
  float* zin;     // exp(Λ_u) cross(C̄_u, Sᵀ dy_u); its suffix sum inside the chunk after the unturn kernel
  float* zout;    // eE_s wo_s cross(dSᵀ x_s, B̄_s); θ·Φ after the unturn kernel
  double* pair;   // A_s − R_s
  float* state;   // (B, H, chunks, K): exp(E) Σ_p cross(dS[p], S[p])
};

__device__ __forceinline__ float cross_pair(float a0, float a1, float b0, float b1) { return fmaf(a0, b1, -(a1 * b0)); }

/** The pair term W2[u][s] wo_s cross(C̄_u, B̄_s) from exp(Λ_u − Λ_s), dy_u·x_s, wo_s and the two pairs: the same operations from either side. */
__device__ __forceinline__ float angle_pair_term(float e, float dyx, float w, float c0, float c1, float b0, float b1) {
  return e * dyx * w * cross_pair(c0, c1, b0, b1);
}

/**
 * Block (kTile tokens of one chunk, b·h): see the file's head; the tile's products on B̄ and
 * C̄ as ssd_token_tile.h says, then this head's dB̄_s and dC̄_s, dx_s, with theta the parts
 * of Φ, and s's scalars.
 */
template <typename T, int kTile>
__global__ void __launch_bounds__(kThreads) mamba3_token_backward_kernel(const T* dy, const T* x, const float* bbar, const float* cbar, const T* Dv,
                                                                          const float* states, const float* dstate, Mamba3Tokens w, T* dx,
                                                                          Mamba3TokenScratch o, Mamba3AngleScratch z, SsdDims d) {
  KILN_DYNAMIC_SHARED(float, smem);
  const SsdTile tl(d, blockIdx.x, kTile);
  if (tl.ta >= tl.t1) return;
  const SsdTokenTile<kTile> m(smem, d);
  const int64_t N = d.N, P = d.P, Q = d.Q, HN = d.H * d.N;
  const int64_t bh = d.bh0 + blockIdx.y;
  const int64_t b = bh / d.H, h = bh - b * d.H;
  const int64_t t0 = tl.t0, t1 = tl.t1, ta = tl.ta;
  const int nt = static_cast<int>(tl.tb - ta);
  const int tid = threadIdx.x;
  const float* lr = w.lam + bh * d.L;
  const float* wo = w.wo + bh * d.L;
  const float* wd = w.wd + bh * d.L;
  const int64_t h0 = h * N, x0 = h * P;
  const float E = lr[t1 - 1];
  fill_token_tile(m, tl, dy, x, bbar, cbar, HN, h0, lr, states, dstate, bh, d);
  const bool last = tl.tb == t1;
  // A thread per (token, n): this head's dB̄_s and dC̄_s.
  for (int64_t i = tid; i < nt * N; i += kThreads) {
    const int j = static_cast<int>(i / N);
    const int64_t n = i - j * N, s = ta + j, row = b * d.L + s, qd = j * Q + (s - t0);
    float db = 0.0f, dc = 0.0f;
    for (int64_t t = s + 1; t < t1; t++) db = fmaf(m.col_e[j * Q + (t - t0)] * m.col_dyx[j * Q + (t - t0)], cbar[(b * d.L + t) * HN + h0 + n], db);
    for (int64_t k = t0; k < s; k++) dc = fmaf(m.row_e[j * Q + (k - t0)] * m.row_dyx[j * Q + (k - t0)] * wo[k], bbar[(b * d.L + k) * HN + h0 + n], dc);
    o.dbh[row * HN + h0 + n] = fmaf(wo[s], db + expf(E - lr[s]) * m.gb[i], wd[s] * m.col_dyx[qd] * m.cs[i]);
    o.dch[row * HN + h0 + n] = fmaf(expf(lr[s]), m.gc[i], dc) + wd[s] * m.row_dyx[qd] * m.bs[i];
  }
  // A thread per (token, p): dx_s.
  const float D = to_f32(Dv[h]);
  for (int64_t i = tid; i < nt * P; i += kThreads) {
    const int j = static_cast<int>(i / P);
    const int64_t p = i - j * P, s = ta + j, row = b * d.L + s, qd = j * Q + (s - t0);
    float a = 0.0f;
    for (int64_t t = s + 1; t < t1; t++) a = fmaf(m.col_e[j * Q + (t - t0)] * m.col_cb[j * Q + (t - t0)], to_f32(dy[((b * d.L + t) * d.H + h) * P + p]), a);
    dx[row * d.xs + x0 + p] = from_f32<T>(D * m.dys[i] + wo[s] * (a + expf(E - lr[s]) * m.gx[i]) + wd[s] * m.col_cb[qd] * m.dys[i]);
  }
  if (z.zin != nullptr) {
    // A thread per (token, pair): the token's parts of Φ.
    const int64_t K = N / 2;
    for (int64_t i = tid; i < nt * K; i += kThreads) {
      const int j = static_cast<int>(i / K);
      const int64_t k = i - j * K, n = 2 * k, s = ta + j, at = ((b * d.L + s) * d.H + h) * K + k;
      const float b0 = m.bs[j * N + n], b1 = m.bs[j * N + n + 1], c0 = m.cs[j * N + n], c1 = m.cs[j * N + n + 1];
      double later = 0.0, earlier = 0.0;
      for (int64_t u = s + 1; u < t1; u++) {
        const float* cu = cbar + (b * d.L + u) * HN + h0 + n;
        later += angle_pair_term(m.col_e[j * Q + (u - t0)], m.col_dyx[j * Q + (u - t0)], wo[s], cu[0], cu[1], b0, b1);
      }
      for (int64_t k2 = t0; k2 < s; k2++) {
        const float* bk = bbar + (b * d.L + k2) * HN + h0 + n;
        earlier += angle_pair_term(m.row_e[j * Q + (k2 - t0)], m.row_dyx[j * Q + (k2 - t0)], wo[k2], c0, c1, bk[0], bk[1]);
      }
      z.pair[at] = later - earlier;
      z.zin[at] = expf(lr[s]) * cross_pair(c0, c1, m.gc[j * N + n], m.gc[j * N + n + 1]);
      z.zout[at] = expf(E - lr[s]) * wo[s] * cross_pair(m.gb[j * N + n], m.gb[j * N + n + 1], b0, b1);
    }
    // The chunk's last tile: the state part, a thread per pair.
    if (last) {
      const float* S = states + (bh * d.chunks + tl.c) * d.PN();
      const float* dS = dstate + (bh * d.chunks + tl.c) * d.PN();
      for (int64_t k = tid; k < K; k += kThreads) {
        float a = 0.0f;
        for (int64_t p = 0; p < P; p++) a += cross_pair(dS[p * N + 2 * k], dS[p * N + 2 * k + 1], S[p * N + 2 * k], S[p * N + 2 * k + 1]);
        z.state[(bh * d.chunks + tl.c) * K + k] = expf(E) * a;
      }
    }
  }
  // A thread per token: its scalars.
  if (tid >= nt) return;
  const int j = tid;
  const int64_t s = ta + j, qd = j * Q + (s - t0);
  const float ls = lr[s], es = expf(E - ls), wos = wo[s];
  float r, dd, u;
  tile_token_dots(m, j, d, r, dd, u);
  float mstrict = 0.0f, intra = 0.0f;
  for (int64_t t = s + 1; t < t1; t++) {
    const int64_t q = j * Q + (t - t0);
    mstrict += m.col_e[q] * m.col_cb[q] * m.col_dyx[q];
  }
  for (int64_t k = t0; k < s; k++) {
    const int64_t q = j * Q + (k - t0);
    intra = fmaf(wo[k], m.row_e[q] * m.row_cb[q] * m.row_dyx[q], intra);
  }
  const float qs = es * wos * r;
  float dl = intra - wos * mstrict + expf(ls) * u - qs;
  if (s == t1 - 1) dl += expf(E) * tile_state_dot(m);
  const int64_t at = bh * d.L + s;
  o.dwo[at] = mstrict + es * r;
  o.dwd[at] = m.col_cb[qd] * m.col_dyx[qd];
  o.dlam[at] = dl;
  o.q[at] = qs;
  o.dd[at] = dd;
}

/**
 * One thread per (b, h, chunk, pair k): zin's suffix sums (tokens in reverse, in place), then
 * in token order Φ_t = state + zin suffix + zout prefix + pair prefix (f64), dθ_t = Δ_t Φ_t,
 * θ_t Φ_t over zout_t (dΔ's share, summed over k later) and dB̄_t, dC̄_t turned back by −φ_t in place.
 */
template <typename T>
__global__ void __launch_bounds__(kThreads) mamba3_unturn_kernel(const T* theta, const float* delta, const float* phis, Mamba3TokenScratch o,
                                                                  Mamba3AngleScratch z, T* dtheta, SsdDims d) {
  const int64_t K = d.N / 2, total = d.batch * d.H * d.chunks * K;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t bhc = i / K, k = i - bhc * K;
    const int64_t bh = bhc / d.chunks, c = bhc - bh * d.chunks;
    const int64_t b = bh / d.H, h = bh - b * d.H, n = 2 * k;
    const int64_t t0 = c * d.Q, t1 = t0 + d.Q < d.L ? t0 + d.Q : d.L;
    float suffix = 0.0f;
    for (int64_t t = t1 - 1; t >= t0; t--) {
      const int64_t at = ((b * d.L + t) * d.H + h) * K + k;
      suffix += z.zin[at];
      z.zin[at] = suffix;
    }
    const float state = z.state[bhc * K + k];
    float prefix = 0.0f;
    double pairs = 0.0;
    for (int64_t t = t0; t < t1; t++) {
      const int64_t at = ((b * d.L + t) * d.H + h) * K + k, e = ((b * d.L + t) * d.H + h) * d.N + n;
      const float Phi = state + z.zin[at] + prefix + static_cast<float>(pairs);
      prefix += z.zout[at];
      pairs += z.pair[at];
      dtheta[at] = from_f32<T>(delta[bh * d.L + t] * Phi);
      z.zout[at] = to_f32(theta[at]) * Phi;
      const float db0 = o.dbh[e], db1 = o.dbh[e + 1], dc0 = o.dch[e], dc1 = o.dch[e + 1];
      float sn, cs;
      sincosf(phis[at], &sn, &cs);
      o.dbh[e] = fmaf(db0, cs, db1 * sn);
      o.dbh[e + 1] = fmaf(db1, cs, -(db0 * sn));
      o.dch[e] = fmaf(dc0, cs, dc1 * sn);
      o.dch[e + 1] = fmaf(dc1, cs, -(dc0 * sn));
    }
  }
}

/**
 * One thread per (b, h, chunk): dΛ's reverse running sum dl, dΔ (decay, weights and, with
 * rot, the rotation's share), dDt with softplus' derivative and dLambda with sigmoid's;
 * partials (h, b·chunks + c) of Σ dDt, Σ Δ·dl (dA) and Σ dy·x.
 */
template <typename T>
__global__ void __launch_bounds__(kThreads) mamba3_chunk_backward_kernel(const T* dt_raw, const T* lambda_raw, const T* dt_bias, const T* a_log,
                                                                          const float* delta, Mamba3TokenScratch o, const float* rot, T* ddt_out,
                                                                          T* dlambda_out, float* part, SsdDims d) {
  const int64_t total = d.batch * d.H * d.chunks, K = d.N / 2;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const SsdChunk ch(d, i, a_log, dt_bias);
    const int64_t h = ch.h;
    float qsum = 0.0f;
    for (int64_t t = ch.t0; t < ch.t1; t++) qsum += o.q[ch.bh * d.L + t];
    float dl = qsum, sdt = 0.0f, sa = 0.0f, sd = 0.0f;
    for (int64_t t = ch.t1 - 1; t >= ch.t0; t--) {
      const int64_t at = ch.bh * d.L + t, row = ch.b * d.L + t;
      dl += o.dlam[at];
      const float dlt = delta[at];
      const float lv = to_f32(lambda_raw[row * d.H + h]);
      float lam, lamc;
      sigmoid_pair(lv, lam, lamc);
      const float dw = o.dwo[at] + o.dwd[at];
      const float prev = t > 0 ? o.dwo[at - 1] : 0.0f;  // dwo_{t−1}: μ_{t−1} = (1 − λ_t) Δ_t
      float g = fmaf(ch.A, dl, fmaf(lam, dw, lamc * prev));
      if (rot != nullptr) {
        float rs = 0.0f;
        for (int64_t k = 0; k < K; k++) rs += rot[(row * d.H + h) * K + k];
        g += rs;
      }
      sa = fmaf(dlt, dl, sa);
      const float v = to_f32(dt_raw[row * d.dts + h]) + ch.bias;
      // softplus'(v) = sigmoid(v) = 1 − exp(−Δ): no division (whose slow path, beside sigmoid_pair's, spills here).
      const float sig = v > 20.0f ? 1.0f : -expm1f(-dlt);
      const float graw = g * sig;
      ddt_out[row * d.dts + h] = from_f32<T>(graw);
      dlambda_out[row * d.H + h] = from_f32<T>(dlt * (dw - prev) * lam * lamc);
      sdt += graw;
      sd += o.dd[at];
    }
    store_param_partials(part, d, ch, sdt, sa, sd);
  }
}

/** One thread per (b, chunk, h, n): rows b·chunks + c of the dBBias and dCBias partials, the chunk's dB̂ and dĈ summed in token order. */
__global__ void __launch_bounds__(kThreads) mamba3_bias_partials_kernel(const float* dbh, const float* dch, float* pb, float* pc, SsdDims d) {
  const int64_t HN = d.H * d.N, total = d.batch * d.chunks * HN;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t bc = i / HN, e = i - bc * HN;
    const int64_t b = bc / d.chunks, c = bc - b * d.chunks;
    const int64_t t0 = c * d.Q, t1 = t0 + d.Q < d.L ? t0 + d.Q : d.L;
    float sb = 0.0f, sc = 0.0f;
    for (int64_t t = t0; t < t1; t++) {
      sb += dbh[(b * d.L + t) * HN + e];
      sc += dch[(b * d.L + t) * HN + e];
    }
    pb[i] = sb;
    pc[i] = sc;
  }
}

// mamba3ScanBackward: dY, x, dt, lambda, theta, B, C, bBias, cBias, dtBias, aLog, D, states, dX, dDt, dLambda, dTheta, dB, dC,
//                     dBBias, dCBias, dDtBias, dALog, dD | batch, seqLen, heads, headDim, groups, stateSize, chunkSize,
//                     xRowStride, dtRowStride, bcRowStride, dtype, gradDtype
void launch_mamba3_backward(const KernelCall& c) {
  const char* name = "mamba3ScanBackward";
  const SsdDims d = dims_of(c, 24);
  const bool rotates = c.at(4) != 0;
  const int64_t bhl = d.batch * d.H * d.L;
  const int64_t nrows = d.batch * d.L * d.H * d.N, npairs = rotates ? nrows / 2 : 0, nchunk_pairs = rotates ? d.batch * d.H * d.chunks * (d.N / 2) : 0;
  const int64_t nstate = d.batch * d.H * d.chunks * d.PN();
  const int64_t npart = 3 * d.H * d.batch * d.chunks, nbias = d.batch * d.chunks * d.H * d.N;
  // Floats; the f64 pair sums take two each (and every offset stays a multiple of 256 bytes).
  float* base = static_cast<float*>(c.scratch(sizeof(float) * (9 * padded(bhl) + 4 * padded(nrows) + 5 * padded(npairs) + padded(nchunk_pairs) +
                                                               padded(nstate) + padded(npart) + 2 * padded(nbias))));
  Mamba3Tokens w{};
  w.delta = base;
  w.lam = w.delta + padded(bhl);
  w.wo = w.lam + padded(bhl);
  w.wd = w.wo + padded(bhl);
  Mamba3TokenScratch o{};
  o.dwo = w.wd + padded(bhl);
  o.dwd = o.dwo + padded(bhl);
  o.dlam = o.dwd + padded(bhl);
  o.q = o.dlam + padded(bhl);
  o.dd = o.q + padded(bhl);
  float* bbar = o.dd + padded(bhl);
  float* cbar = bbar + padded(nrows);
  o.dbh = cbar + padded(nrows);
  o.dch = o.dbh + padded(nrows);
  float* phis = o.dch + padded(nrows);
  Mamba3AngleScratch z{};
  float* angle_base = phis + padded(npairs);
  if (rotates) {
    z.zin = angle_base;
    z.zout = z.zin + padded(npairs);
    z.pair = reinterpret_cast<double*>(z.zout + padded(npairs));
    z.state = z.zout + 3 * padded(npairs);
  }
  float* dstate = angle_base + 4 * padded(npairs) + padded(nchunk_pairs);
  float* part = dstate + padded(nstate);
  float* pb = part + padded(npart);
  float* pc = pb + padded(nbias);
  dispatch_float_grad(c.i32(34), c.i32(35), name, [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    const T* dy = c.ptr<const T>(0);
    const T* x = c.ptr<const T>(1);
    const T* dt_raw = c.ptr<const T>(2);
    const T* lambda_raw = c.ptr<const T>(3);
    const T* theta = c.ptr<const T>(4);
    const T* dt_bias = c.ptr<const T>(9);
    const T* a_log = c.ptr<const T>(10);
    launch_mamba3_inputs<T>(name, c.stream, dt_raw, lambda_raw, theta, c.ptr<const T>(5), c.ptr<const T>(6), c.ptr<const T>(7), c.ptr<const T>(8), dt_bias,
                            a_log, w, bbar, cbar, rotates ? phis : nullptr, d);
    launch_chunk_states<false>(name, c.stream, dy, static_cast<const float*>(cbar), w.wo, w.lam, dstate, per_head_rows(d));
    launch_token_kernel(name, c.stream, mamba3_token_backward_kernel<T, kLargeTile>, mamba3_token_backward_kernel<T, kSmallTile>, d, dy, x,
                        static_cast<const float*>(bbar), static_cast<const float*>(cbar), c.ptr<const T>(11), c.ptr<const float>(12),
                        static_cast<const float*>(dstate), w, c.ptr<T>(13), o, z);
    if (rotates) {
      launch(name, mamba3_unturn_kernel<T>, grid_stride_blocks(nchunk_pairs, kThreads), kThreads, 0, c.stream, theta, static_cast<const float*>(w.delta),
             static_cast<const float*>(phis), o, z, c.ptr<T>(16), d);
    }
    launch(name, mamba3_chunk_backward_kernel<T>, grid_stride_blocks(d.batch * d.H * d.chunks, kThreads), kThreads, 0, c.stream, dt_raw, lambda_raw, dt_bias,
           a_log, static_cast<const float*>(w.delta), o, static_cast<const float*>(z.zout), c.ptr<T>(14), c.ptr<T>(15), part, d);
    launch(name, ssd_group_sum_kernel<T>, grid_stride_blocks(d.batch * d.L * d.G * d.N, kThreads), kThreads, 0, c.stream, static_cast<const float*>(o.dbh),
           static_cast<const float*>(o.dch), c.ptr<T>(17), c.ptr<T>(18), d);
    launch(name, mamba3_bias_partials_kernel, grid_stride_blocks(nbias, kThreads), kThreads, 0, c.stream, static_cast<const float*>(o.dbh),
           static_cast<const float*>(o.dch), pb, pc, d);
    launch_sum_chunk_partials<G>(name, c.stream, PartialSets<G>{{pb, pc, nullptr}, {c.ptr<G>(19), c.ptr<G>(20), nullptr}}, 2,
                                 static_cast<int>(d.batch * d.chunks), static_cast<int>(d.H * d.N), true);
    launch(name, ssd_param_kernel<T, G>, dim3(ceil_div(elems(d.H), kThreads)), kThreads, 0, c.stream, static_cast<const float*>(part), a_log, c.ptr<G>(21),
           c.ptr<G>(22), c.ptr<G>(23), d);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("mamba3ScanBackward", launch_mamba3_backward);

}  // namespace kiln
