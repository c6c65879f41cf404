// Native causal attention, forward and backward (the math in attention_call.h), on one
// instruction set's vectors V. Shapes: T seqLen, D headDim, DV vHeadDim, W window, BQ
// queries a block; dpad / vpad are D / DV rounded up to whole vectors (zeros past them),
// Tpad is T rounded up likewise.
//
// Every product is one register-tiled form, C(m x n) (+)= A(m x depth) B(depth x n) with B
// rows contiguous and A read one broadcast at a time, row-major or transposed:
//   forward:  S = Q K^T (over D),  O = P V (over keys)
//   backward: S = Q K^T,  dP = dO V^T,  dV += P^T dO,  dK += dS^T Q,  dQ = dS K
// K^T (D x Tpad) and V^T (DV x Tpad) are built once per (b, kv head) a thread works on, K
// and V rows (Tpad x dpad, x vpad) likewise. A block of queries q0 .. q0+nq-1 reads keys
// from k0 (the window's first key of q0, down to a whole vector) to its last query; each
// MR-row sliver of a product computes only the columns and depth its rows can see. P and
// dS rows are written whole, zero outside each row's keys [lo, hi), so any depth a sliver
// reads holds either a real value or zero.
//
// Scores are pre-multiplied by log2(e) and exponentials taken base 2 (vexp2, simd_exp.h); the
// forward takes each row's max and sum over all its keys at once (a block's scores fit in
// BQ x Tpad floats), so no running rescale is needed. lse = m ln 2 + log(l), the log in f64.
//
// Threads: work units come from the call's counter (forward: (b, h, query block) in that
// order; backward: (b, kv head), whose thread walks every query head of the group, so dK
// and dV have one writer). Each output element's sums run in an order fixed by the shapes,
// so the bits do not depend on which thread takes which unit, or on how many there are.
#ifndef KILN_NATIVE_NEST_ATTENTION_H
#define KILN_NATIVE_NEST_ATTENTION_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_call.h"
#include "nest_pack.h"
#include "simd_exp.h"

namespace kiln_native {
namespace {

constexpr int kAttnBQ = 48;  // queries a block
constexpr float kLog2e = 1.44269504088896341f;
constexpr double kLn2 = 0.69314718055994530942;

/* Register tile of the attention products: 6 rows x 4 vectors on AVX-512 (24 of 32 registers), 6 x 2 on AVX2, 6 x 3 on NEON
 * (18 accumulators, 6 broadcasts and 3 vectors of B: 27 of 32; 6 x 4 spills, simd_neon.h). */
template <class V>
struct AttnTile {
  static constexpr int MR = 6;
  static constexpr int NV = V::L == 16 ? 4 : V::L == 8 ? 2 : 3;
};

static inline int round_up_to(int x, int m) { return (x + m - 1) / m * m; }
static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int iclamp(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

/* C(R x NV*L) = (keep ? C : 0) + sum_{p < depth} A(r, p) b[p][...]; A(r, p) = a[p * lda + r] when TA, else a[r * lda + p]. */
template <class V, int R, int NV, bool TA>
static void attn_tile(int depth, const float* __restrict a, int64_t lda, const float* __restrict b, int64_t ldb,
                      float* __restrict c, int64_t ldc, bool keep) {
  typename V::vec acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[r][v] = keep ? V::load(c + r * ldc + v * V::L) : V::zero();
  for (int p = 0; p < depth; p++) {
    typename V::vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = V::load(b + p * ldb + v * V::L);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const typename V::vec av = V::splat(TA ? a[p * lda + r] : a[r * lda + p]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[r][v] = V::fma(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) V::store(c + r * ldc + v * V::L, acc[r][v]);
}

/* attn_tile with rows r <= MR and vectors nv <= NV chosen at run time. */
template <class V, bool TA, int R, int NV = AttnTile<V>::NV>
static inline void attn_tile_nv(int nv, int depth, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, bool keep) {
  if constexpr (NV > 1) {
    if (nv < NV) return attn_tile_nv<V, TA, R, NV - 1>(nv, depth, a, lda, b, ldb, c, ldc, keep);
  }
  attn_tile<V, R, NV, TA>(depth, a, lda, b, ldb, c, ldc, keep);
}

template <class V, bool TA, int R = AttnTile<V>::MR>
static inline void attn_tile_any(int rows, int nv, int depth, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                                 bool keep) {
  if constexpr (R > 1) {
    if (rows < R) return attn_tile_any<V, TA, R - 1>(rows, nv, depth, a, lda, b, ldb, c, ldc, keep);
  }
  attn_tile_nv<V, TA, R>(nv, depth, a, lda, b, ldb, c, ldc, keep);
}

/* What one sliver of rows [s, s + rows) computes: columns [c0, c1) (whole vectors), depth [p0, p1). */
struct SliverRange {
  int c0, c1, p0, p1;
};

/* C (m x ...) (+)= A B, sliver by sliver, each restricted by range(s, rows). */
template <class V, bool TA, class Range>
static void attn_gemm(int m, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, bool keep, Range range) {
  constexpr int MR = AttnTile<V>::MR, NR = AttnTile<V>::NV * V::L;
  for (int s = 0; s < m; s += MR) {
    const int rows = m - s < MR ? m - s : MR;
    const SliverRange r = range(s, rows);
    const int depth = imax(r.p1 - r.p0, 0);
    const float* as = TA ? a + (int64_t)r.p0 * lda + s : a + (int64_t)s * lda + r.p0;
    const float* bs = b + (int64_t)r.p0 * ldb;
    for (int j = r.c0; j < r.c1; j += NR) {
      const int nv = (r.c1 - j < NR ? r.c1 - j : NR) / V::L;
      attn_tile_any<V, TA>(rows, nv, depth, as, lda, bs + j, ldb, c + (int64_t)s * ldc + j, ldc, keep);
    }
  }
}

/* dst[0, npad) = mul * (n elements at `index` of a dtype array), zeros past n. */
template <class V, int DT>
static inline void attn_load_row(const uint8_t* base, int64_t index, int n, int npad, float mul, float* dst) {
  int i = 0;
  for (; i < n; i += V::L) {
    typename V::vec x = vload_n<V, DT>(base, index + i, n - i);
    if (mul != 1.0f) x = V::mul(x, V::splat(mul));
    V::store(dst + i, x);
  }
  for (; i < npad; i += V::L) V::store(dst + i, V::zero());
}

/* n elements at `index` of a dtype array = mul * src, rounded once to DT. */
template <class V, int DT>
static inline void attn_store_row(uint8_t* base, int64_t index, int n, const float* src, float mul) {
  for (int i = 0; i < n; i += V::L) vstore_n<V, DT>(base, index + i, V::mul(V::load(src + i), V::splat(mul)), n - i);
}

/* Shapes of a call, with the padded sizes and the key range of a query block. */
struct AttnDims {
  int T, W, D, DV, dpad, vpad, Tpad, group, blocks;
  explicit AttnDims(const AttentionCall& a, int lanes)
      : T(a.seq_len), W(a.window), D(a.head_dim), DV(a.v_head_dim), dpad(round_up_to(a.head_dim, lanes)),
        vpad(round_up_to(a.v_head_dim, lanes)), Tpad(round_up_to(a.seq_len, lanes)), group(a.heads / a.kv_heads),
        blocks((a.seq_len + kAttnBQ - 1) / kAttnBQ) {}
};

/* A block of queries [q0, q0 + nq) and the keys it reads, [k0, k0 + cols); row i sees keys [lo(i), hi(i)) of them. */
struct AttnBlock {
  int q0, nq, k0, cols, cpad, W;
  AttnBlock(const AttnDims& d, int q0_, int lanes) : q0(q0_), nq(d.T - q0_ < kAttnBQ ? d.T - q0_ : kAttnBQ), W(d.W) {
    k0 = imax(q0 - d.W + 1, 0) / lanes * lanes;
    cols = q0 + nq - k0;
    cpad = round_up_to(cols, lanes);
  }
  int lo(int i) const { return imax(q0 + i - W + 1 - k0, 0); }
  int hi(int i) const { return q0 + i + 1 - k0; }
  /* Score columns of the sliver [s, s + rows): its first row's first key to its last row's last, in whole vectors. */
  SliverRange score_cols(int s, int rows, int lanes, int depth) const {
    return {lo(s) / lanes * lanes, round_up_to(hi(s + rows - 1), lanes), 0, depth};
  }
  /* Depth (keys) of the sliver [s, s + rows) of queries, over `width` output columns. */
  SliverRange key_depth(int s, int rows, int width) const { return {0, width, lo(s), hi(s + rows - 1)}; }
  /* Depth (queries) of the sliver [s, s + rows) of keys: the queries that see any of them. */
  SliverRange query_depth(int s, int rows, int width) const {
    return {0, width, iclamp(k0 + s - q0, 0, nq), iclamp(k0 + s + rows - 1 + W - q0, 0, nq)};
  }
};

/* One thread's buffers, grown as calls need, kept until the thread ends. */
struct AttnScratch {
  float* p = nullptr;
  int64_t floats = 0;
  ~AttnScratch() { free(p); }
  float* get(int64_t n) {
    if (n > floats) {
      free(p);
      const size_t bytes = (size_t)((n * 4 + 63) / 64 * 64);
      p = (float*)aligned_alloc(64, bytes);
      if (!p) abort();
      floats = n;
    }
    return p;
  }
};

template <class V>
static float* attn_scratch(int64_t floats) {
  static thread_local AttnScratch scratch;
  return scratch.get(floats);
}

/* Carves consecutive regions (each a whole number of 64-byte lines) out of one buffer. */
struct Carver {
  float* at;
  int64_t used = 0;
  static int64_t lines(int64_t n) { return (n + 15) / 16 * 16; }
  float* take(int64_t n) {
    float* p = at ? at + used : nullptr;
    used += lines(n);
    return p;
  }
};

/* K^T (D x Tpad) of kv head g of batch b, from the dtype array; columns T .. Tpad zero. */
template <class V, int DT>
static void attn_keys_transposed(const uint8_t* src, int64_t stride, int n, const AttnDims& d, int b, int g, float* dst) {
  pack_rows_transposed<V, DT>(src, (int64_t)b * d.T * stride + (int64_t)g * n, stride, d.T, 0, n, dst, d.Tpad);
}

/* ---- forward ---------------------------------------------------------------------- */

template <class V>
struct AttnForwardWork {
  float *kt, *v, *q, *s, *o, *m, *l;
  AttnForwardWork(const AttnDims& d, float* base, int64_t* floats) {
    Carver c{base};
    kt = c.take((int64_t)d.D * d.Tpad);
    v = c.take((int64_t)d.Tpad * d.vpad);
    q = c.take((int64_t)kAttnBQ * d.dpad);
    s = c.take((int64_t)kAttnBQ * d.Tpad);
    o = c.take((int64_t)kAttnBQ * d.vpad);
    m = c.take(kAttnBQ);
    l = c.take(kAttnBQ);
    *floats = c.used;
  }
};

template <class V, int DT>
static void attn_forward_keys(const AttentionCall& a, const AttnDims& d, const AttnForwardWork<V>& w, int b, int g) {
  attn_keys_transposed<V, DT>(a.k, a.kv_stride, d.D, d, b, g, w.kt);
  for (int u = 0; u < d.T; u++) attn_load_row<V, DT>(a.v, ((int64_t)b * d.T + u) * a.v_stride + (int64_t)g * d.DV, d.DV, d.vpad, 1.0f, w.v + (int64_t)u * d.vpad);
  memset(w.v + (int64_t)d.T * d.vpad, 0, sizeof(float) * (size_t)(d.Tpad - d.T) * d.vpad);
}

/* Row i of the block's scores (log2 units) into p = 2^(s - max) over [lo, hi), zeros elsewhere up to cpad; returns max and sum. */
template <class V>
static inline void attn_softmax_row(float* srow, int lo, int hi, int cpad, float* m_out, float* l_out) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const vec neg_inf = V::splat(-__builtin_inff()), zero = V::zero();
  const int j0 = lo / L * L;
  vec vmax = neg_inf;
  for (int j = j0; j < hi; j += L) vmax = V::max(vmax, V::keep(V::load(srow + j), lo - j, hi - j, neg_inf));
  const float m = V::hmax(vmax);
  const vec vm = V::splat(m);
  vec vsum = zero;
  for (int j = 0; j < j0; j += L) V::store(srow + j, zero);
  int j = j0;
  for (; j < hi; j += L) {
    const vec p = V::keep(vexp2<V>(V::sub(V::load(srow + j), vm)), lo - j, hi - j, zero);
    vsum = V::add(vsum, p);
    V::store(srow + j, p);
  }
  for (; j < cpad; j += L) V::store(srow + j, zero);
  *m_out = m;
  *l_out = V::hsum(vsum);
}

template <class V, int DT>
static void attn_forward_block(const AttentionCall& a, const AttnDims& d, const AttnForwardWork<V>& w, int b, int h, int q0) {
  constexpr int L = V::L;
  const AttnBlock k(d, q0, L);
  const int64_t lds = k.cpad;
  for (int i = 0; i < k.nq; i++)
    attn_load_row<V, DT>(a.q, ((int64_t)b * d.T + q0 + i) * a.q_stride + (int64_t)h * d.D, d.D, d.dpad, a.scale * kLog2e, w.q + (int64_t)i * d.dpad);
  attn_gemm<V, false>(k.nq, w.q, d.dpad, w.kt + k.k0, d.Tpad, w.s, lds, false, [&](int s, int rows) { return k.score_cols(s, rows, L, d.D); });
  for (int i = 0; i < k.nq; i++) attn_softmax_row<V>(w.s + i * lds, k.lo(i), k.hi(i), k.cpad, &w.m[i], &w.l[i]);
  attn_gemm<V, false>(k.nq, w.s, lds, w.v + (int64_t)k.k0 * d.vpad, d.vpad, w.o, d.vpad, false, [&](int s, int rows) { return k.key_depth(s, rows, d.vpad); });
  for (int i = 0; i < k.nq; i++) {
    const int64_t row = (int64_t)b * d.T + q0 + i;
    attn_store_row<V, DT>(a.out, row * a.out_stride + (int64_t)h * d.DV, d.DV, w.o + (int64_t)i * d.vpad, 1.0f / w.l[i]);
    a.lse[((int64_t)b * a.heads + h) * d.T + q0 + i] = (float)((double)w.m[i] * kLn2 + log((double)w.l[i]));
  }
}

template <class V, int DT>
static void attn_forward_typed(const AttentionCall& a) {
  const AttnDims d(a, V::L);
  int64_t floats;
  AttnForwardWork<V> sizing(d, nullptr, &floats);
  const AttnForwardWork<V> w(d, attn_scratch<V>(floats), &floats);
  const uint32_t units = (uint32_t)a.batch * (uint32_t)a.heads * (uint32_t)d.blocks;
  int have_b = -1, have_g = -1;
  for (uint32_t u; (u = __atomic_fetch_add(a.tickets, 1u, __ATOMIC_RELAXED)) < units;) {
    const int qb = (int)(u % (uint32_t)d.blocks), bh = (int)(u / (uint32_t)d.blocks);
    const int b = bh / a.heads, h = bh % a.heads, g = h / d.group;
    if (b != have_b || g != have_g) {
      attn_forward_keys<V, DT>(a, d, w, b, g);
      have_b = b;
      have_g = g;
    }
    attn_forward_block<V, DT>(a, d, w, b, h, qb * kAttnBQ);
  }
}

/* ---- backward --------------------------------------------------------------------- */

template <class V>
struct AttnBackwardWork {
  float *k, *kt, *vt, *dk, *dv, *q, *dout, *orow, *dq, *s, *dp, *dd, *lse;
  AttnBackwardWork(const AttnDims& d, float* base, int64_t* floats) {
    Carver c{base};
    k = c.take((int64_t)d.Tpad * d.dpad);
    kt = c.take((int64_t)d.D * d.Tpad);
    vt = c.take((int64_t)d.DV * d.Tpad);
    dk = c.take((int64_t)d.Tpad * d.dpad);
    dv = c.take((int64_t)d.Tpad * d.vpad);
    q = c.take((int64_t)kAttnBQ * d.dpad);
    dout = c.take((int64_t)kAttnBQ * d.vpad);
    orow = c.take(d.vpad);
    dq = c.take((int64_t)kAttnBQ * d.dpad);
    s = c.take((int64_t)kAttnBQ * d.Tpad);
    dp = c.take((int64_t)kAttnBQ * d.Tpad);
    dd = c.take(kAttnBQ);
    lse = c.take(kAttnBQ);
    *floats = c.used;
  }
};

/* Row i: p = 2^(s c - lse log2 e) over s, dS = p (dP - D) over dP, both over [lo, hi) and zero elsewhere up to cpad. */
template <class V>
static inline void attn_gradient_row(float* srow, float* dprow, int lo, int hi, int cpad, float c, float lse2, float dd) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const vec zero = V::zero(), vc = V::splat(c), vl = V::splat(lse2), vd = V::splat(dd);
  const int j0 = lo / L * L;
  for (int j = 0; j < j0; j += L) {
    V::store(srow + j, zero);
    V::store(dprow + j, zero);
  }
  int j = j0;
  for (; j < hi; j += L) {
    const vec p = V::keep(vexp2<V>(V::sub(V::mul(V::load(srow + j), vc), vl)), lo - j, hi - j, zero);
    V::store(srow + j, p);
    V::store(dprow + j, V::mul(p, V::sub(V::load(dprow + j), vd)));
  }
  for (; j < cpad; j += L) {
    V::store(srow + j, zero);
    V::store(dprow + j, zero);
  }
}

template <class V, int DT>
static void attn_backward_block(const AttentionCall& a, const AttnDims& d, const AttnBackwardWork<V>& w, int b, int h, int q0) {
  using vec = typename V::vec;
  constexpr int L = V::L;
  const AttnBlock k(d, q0, L);
  const int64_t lds = k.cpad;
  const float c = a.scale * kLog2e;
  for (int i = 0; i < k.nq; i++) {
    const int64_t row = (int64_t)b * d.T + q0 + i;
    attn_load_row<V, DT>(a.q, row * a.q_stride + (int64_t)h * d.D, d.D, d.dpad, 1.0f, w.q + (int64_t)i * d.dpad);
    float* dorow = w.dout + (int64_t)i * d.vpad;
    attn_load_row<V, DT>(a.d_out, row * a.out_stride + (int64_t)h * d.DV, d.DV, d.vpad, 1.0f, dorow);
    attn_load_row<V, DT>(a.out, row * a.out_stride + (int64_t)h * d.DV, d.DV, d.vpad, 1.0f, w.orow);
    vec acc = V::zero();
    for (int x = 0; x < d.vpad; x += L) acc = V::fma(V::load(dorow + x), V::load(w.orow + x), acc);
    w.dd[i] = V::hsum(acc);
    w.lse[i] = a.lse[((int64_t)b * a.heads + h) * d.T + q0 + i] * kLog2e;
  }
  attn_gemm<V, false>(k.nq, w.q, d.dpad, w.kt + k.k0, d.Tpad, w.s, lds, false, [&](int s, int rows) { return k.score_cols(s, rows, L, d.D); });
  attn_gemm<V, false>(k.nq, w.dout, d.vpad, w.vt + k.k0, d.Tpad, w.dp, lds, false, [&](int s, int rows) { return k.score_cols(s, rows, L, d.DV); });
  for (int i = 0; i < k.nq; i++) attn_gradient_row<V>(w.s + i * lds, w.dp + i * lds, k.lo(i), k.hi(i), k.cpad, c, w.lse[i], w.dd[i]);
  attn_gemm<V, true>(k.cols, w.s, lds, w.dout, d.vpad, w.dv + (int64_t)k.k0 * d.vpad, d.vpad, true, [&](int s, int rows) { return k.query_depth(s, rows, d.vpad); });
  attn_gemm<V, true>(k.cols, w.dp, lds, w.q, d.dpad, w.dk + (int64_t)k.k0 * d.dpad, d.dpad, true, [&](int s, int rows) { return k.query_depth(s, rows, d.dpad); });
  attn_gemm<V, false>(k.nq, w.dp, lds, w.k + (int64_t)k.k0 * d.dpad, d.dpad, w.dq, d.dpad, false, [&](int s, int rows) { return k.key_depth(s, rows, d.dpad); });
  for (int i = 0; i < k.nq; i++) {
    const int64_t row = (int64_t)b * d.T + q0 + i;
    attn_store_row<V, DT>(a.d_q, row * a.q_stride + (int64_t)h * d.D, d.D, w.dq + (int64_t)i * d.dpad, a.scale);
  }
}

template <class V, int DT>
static void attn_backward_pair(const AttentionCall& a, const AttnDims& d, const AttnBackwardWork<V>& w, int b, int g) {
  for (int u = 0; u < d.T; u++) attn_load_row<V, DT>(a.k, ((int64_t)b * d.T + u) * a.kv_stride + (int64_t)g * d.D, d.D, d.dpad, 1.0f, w.k + (int64_t)u * d.dpad);
  memset(w.k + (int64_t)d.T * d.dpad, 0, sizeof(float) * (size_t)(d.Tpad - d.T) * d.dpad);
  attn_keys_transposed<V, DT>(a.k, a.kv_stride, d.D, d, b, g, w.kt);
  attn_keys_transposed<V, DT>(a.v, a.v_stride, d.DV, d, b, g, w.vt);
  memset(w.dk, 0, sizeof(float) * (size_t)d.Tpad * d.dpad);
  memset(w.dv, 0, sizeof(float) * (size_t)d.Tpad * d.vpad);
  for (int h = g * d.group; h < (g + 1) * d.group; h++)
    for (int q0 = 0; q0 < d.T; q0 += kAttnBQ) attn_backward_block<V, DT>(a, d, w, b, h, q0);
  for (int u = 0; u < d.T; u++) {
    const int64_t row = (int64_t)b * d.T + u;
    attn_store_row<V, DT>(a.d_k, row * a.kv_stride + (int64_t)g * d.D, d.D, w.dk + (int64_t)u * d.dpad, a.scale);
    attn_store_row<V, DT>(a.d_v, row * a.v_stride + (int64_t)g * d.DV, d.DV, w.dv + (int64_t)u * d.vpad, 1.0f);
  }
}

template <class V, int DT>
static void attn_backward_typed(const AttentionCall& a) {
  const AttnDims d(a, V::L);
  int64_t floats;
  AttnBackwardWork<V> sizing(d, nullptr, &floats);
  const AttnBackwardWork<V> w(d, attn_scratch<V>(floats), &floats);
  const uint32_t pairs = (uint32_t)a.batch * (uint32_t)a.kv_heads;
  for (uint32_t u; (u = __atomic_fetch_add(a.tickets, 1u, __ATOMIC_RELAXED)) < pairs;)
    attn_backward_pair<V, DT>(a, d, w, (int)(u / (uint32_t)a.kv_heads), (int)(u % (uint32_t)a.kv_heads));
}

template <class V>
static void attention_forward(const AttentionCall& a, int, int) {
  if (a.dt == kF32) attn_forward_typed<V, kF32>(a);
  else if (a.dt == kBf16) attn_forward_typed<V, kBf16>(a);
  else attn_forward_typed<V, kF16>(a);
}

template <class V>
static void attention_backward(const AttentionCall& a, int, int) {
  if (a.dt == kF32) attn_backward_typed<V, kF32>(a);
  else if (a.dt == kBf16) attn_backward_typed<V, kBf16>(a);
  else attn_backward_typed<V, kF16>(a);
}

}  // namespace
}  // namespace kiln_native

#endif
