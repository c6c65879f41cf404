// attention.cu: causal scaled-dot-product attention, flash style, GQA aware: the
// forward kernel here, the backward in attention_backward.cu, shared tiles in
// attention_tiles.h.
//
// Math, for query head h reading kv head g = h / (heads / kvHeads), W the window (seqLen
// unless a sliding window is given), F[t] = max(t - W + 1, docStarts[t]) query t's first
// key (docStarts, packed rows of several documents: where t's document begins; 0 without):
//   s[t,u] = scale * q[t]·k[u] for F[t] <= u <= t;  p = softmax_u(s);  out[t] = sum_u p[t,u] v[u]
//   lse[t] = log sum_u exp(s[t,u])
// Backward, with D[t] = dOut[t]·out[t] and p recomputed as exp(s - lse):
//   dP = dOut v^T;  dS = p (dP - D);  dQ = scale dS k;  dK = scale dS^T q;  dV = p^T dOut
// dK and dV of kv head g sum over the query heads of its group. Exponentials are
// taken base 2 on scores pre-multiplied by log2(e).
//
// Memory layout (row-major, one row per token, elements of T = f32 / bf16 / f16); D is
// the query/key head size, DV the value/output head size (Multi-head Latent Attention: DV != D):
//   q, dQ:     row (b*T + t), columns [h*D, h*D + D),    rows qRowStride apart
//   out, dOut: row (b*T + t), columns [h*DV, h*DV + DV), rows outRowStride apart
//   k, dK:     row (b*T + u), columns [g*D, g*D + D),    rows kvRowStride apart
//   v, dV:     row (b*T + u), columns [g*DV, g*DV + DV), rows vRowStride apart
//   lse:       f32 (batch, heads, T)
//   docStarts: i32 (batch, T), optional
// Only those logical elements are read or written, so q/k/v (and dQ/dK/dV) may be
// interleaved slices of one packed buffer. dQ, dK, dV are overwritten.
//
// Tiling: a block of NW warps owns NW * 4 * RM rows (queries, or keys for dK/dV);
// lane = rg * 8 + cg: row group rg (RM consecutive rows), column group cg. Tiles
// live in dynamic shared memory as f32 rows of ds = round_up(max(D, DV), 32) + 4
// floats (zero padded; ds = 4 mod 8 keeps the float4 reads of 8 rows conflict free);
// products over q/k run D's depth and column blocks, those over v/dO run DV's.
// Two register-tiled products cover every step:
//   nt: C(rows x cols) += A B^T over the head dimension (S = Q K^T, dP = dO V^T, ...);
//       thread columns j*8 + cg;
//   nn: C(rows x D) += A B over the tile, A a per-warp tile (P, dS, P^T, dS^T);
//       thread columns blk*32 + cg*4 + e.
// Tile sizes and register accumulators are chosen at launch from max(D, DV) (buckets
// 32, 64, 128, 256); nothing of size T x T exists beyond one tile. Tiles above the
// causal diagonal are skipped, and so are tiles wholly before the rows' first keys
// (attention_tiles.h's first_key, which never decreases along a row): a query tile
// starting at q0 starts at key tile floor(F[q0] / BK), a key tile ending at key u stops
// at the query tile holding u + W - 1, or before the first query tile whose first row's
// F passes u; pairs before a row's first key inside edge tiles are masked as the
// diagonal's are.
//
// Kernels:
//   forward:  one block per (query tile, head, batch), online softmax over kv tiles;
//             bf16/f16 with headDim and vHeadDim <= 128 run on tensor cores:
//             attention_forward_mma.cu (mma.sync), or attention_forward_tc.cu (WMMA)
//             with KILN_ATTENTION_PATH=wmma (KILN_ATTENTION_PATH=simt: this one).
//   backward (attention_backward.cu): (1) D[t] per query row and head into scratch (laid out like lse);
//             (2) one block per (kv tile, kv head, batch): loops over the query tiles of
//                 every head of the GQA group, accumulates dK, dV in registers, writes once;
//             (3) one block per (query tile, head, batch): loops over kv tiles,
//                 accumulates dQ in registers, writes once.
// Every output element has one writer and every sum runs in a fixed order: results
// do not depend on block or thread scheduling. No atomics.
#include "attention_tiles.h"

namespace kiln {
namespace {

// ---- forward ----------------------------------------------------------------------

template <typename T, int DMAX, int RM, int NW, int BK>
__global__ void __launch_bounds__(NW * 32, 1)
    attention_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                             float* __restrict__ lse, int batch, int seq, int heads, int kv_heads, int d, int dv,
                             int64_t q_stride, int64_t kv_stride, int64_t v_stride, int64_t out_stride, float scale, int window,
                             const int* __restrict__ doc_starts) {
  constexpr int RW = 4 * RM, BQ = NW * RW, NB = DMAX / 32, NC = BK / 8, PS = BK + 4;
  // Every tile has the row pitch and zero padding of the wider head size; each product
  // runs the depth (dp4) or column blocks (nblk) of its own: gm for q/k, gv for v/dO.
  const Geometry gw = geometry(max(d, dv)), gm = geometry(d), gv = geometry(dv);
  const int ds = gw.ds;
  KILN_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* ks = qs + BQ * ds;
  float* vs = ks + BK * ds;
  float* ps = vs + BK * ds;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane >> 3, cg = lane & 7;
  const int row0 = warp * RW + rg * RM;
  float* pw = ps + warp * RW * PS + rg * RM * PS;

  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, BQ);
  const int h = tile.head, b = tile.batch, g = tile.kv_head, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0;
  const int* docs = doc_row(doc_starts, tok0);

  load_tile<T, NW>(qs, ds, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, BQ, nq, d, gw.dw, scale * kLog2e);
  const T* kb = k + tok0 * kv_stride + int64_t{g} * d;
  const T* vb = v + tok0 * v_stride + int64_t{g} * dv;

  float o[RM][NB * 4], m[RM], l[RM];
  int fk[RM];  // the rows' first keys
#pragma unroll
  for (int i = 0; i < RM; i++) {
    m[i] = neg_inf();
    l[i] = 0.0f;
    fk[i] = first_key(docs, q0 + row0 + i, seq, window);
#pragma unroll
    for (int c = 0; c < NB * 4; c++) o[i][c] = 0.0f;
  }

  const int n_kt = (q0 + nq - 1) / BK + 1;
  const int wfirst = q0 + warp * RW, wlast = wfirst + RW - 1;  // this warp's query rows
  const int wkey = first_key(docs, wfirst, seq, window);        // the lowest first key of the warp's rows
  for (int kt = first_key_tile(docs, q0, seq, window, BK); kt < n_kt; kt++) {
    const int kv0 = kt * BK, nk = min(BK, seq - kv0);
    __syncthreads();  // the previous tile's K and V are no longer read
    load_tile<T, NW>(ks, ds, kb + int64_t{kv0} * kv_stride, kv_stride, BK, nk, d, gw.dw, 1.0f);
    load_tile<T, NW>(vs, ds, vb + int64_t{kv0} * v_stride, v_stride, BK, nk, dv, gw.dw, 1.0f);
    __syncthreads();

    float s[RM][NC];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < NC; j++) s[i][j] = 0.0f;
    nt_product<RM, NC>(s, qs + row0 * ds, ds, ks + cg * ds, ds, gm.dp4);

    // Online softmax. A row may meet tiles with no key it sees before its first live
    // key (m = -inf); its exponentials then take base 0 (p = 0, alpha = 0, never NaN).
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const int t = q0 + row0 + i;
      float mx = neg_inf();
#pragma unroll
      for (int j = 0; j < NC; j++) {
        const int u = kv0 + j * 8 + cg;
        if (u > t || u >= seq || u < fk[i]) s[i][j] = neg_inf();
        mx = fmaxf(mx, s[i][j]);
      }
      mx = max8(mx);
      const float m_new = fmaxf(m[i], mx), base = m_new == neg_inf() ? 0.0f : m_new;
      const float alpha = exp2f(m[i] - base);
      float rs = 0.0f;
#pragma unroll
      for (int j = 0; j < NC; j++) {
        const float p = exp2f(s[i][j] - base);
        rs += p;
        pw[i * PS + j * 8 + cg] = p;
      }
      rs = sum8(rs);
      l[i] = l[i] * alpha + rs;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < NB * 4; c++) o[i][c] *= alpha;
    }
    __syncwarp();
    // Keys past the warp's last query, or before its first query's first key, have p = 0: skip them.
    const int k0 = min(max(wkey - kv0, 0) & ~3, BK), depth = min(BK, (wlast - kv0 + 1 + 3) & ~3);
    if (k0 < depth) nn_product<RM, NB>(o, pw, PS, vs + cg * 4, ds, k0, depth, gv.nblk);
    __syncwarp();
  }

#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int t = q0 + row0 + i;
    if (t < seq) {
      store_row<T, RM, NB>(out + (tok0 + t) * out_stride + int64_t{h} * dv, o, i, cg, dv, 1.0f / l[i]);
      if (cg == 0) lse[(int64_t{b} * heads + h) * seq + t] = (m[i] + log2f(l[i])) * kLn2;
    }
  }
}

// attentionForward: q, k, v, out, lse, docStarts | batch, seqLen, heads, kvHeads, headDim, vHeadDim, qRowStride, kvRowStride, vRowStride,
//                   outRowStride, scale, dtype, window
void launch_attention_forward(const KernelCall& c) {
  if (launch_attention_forward_tensor_cores(c)) return;
  const Args a = read_args(c, kForwardOperands);
  dispatch_float(a.dtype, "attentionForward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(a, "attentionForward", [&](auto dmax) {
      constexpr int DMAX = decltype(dmax)::value, RM = Config<DMAX>::kFwdRM, BK = Config<DMAX>::kFwdBK;
      constexpr int BQ = kWarps * 4 * RM;
      const size_t ds = row_floats(a.d_max());
      const size_t smem = (BQ * ds + 2 * BK * ds + size_t{BQ} * (BK + 4)) * sizeof(float);
      auto kernel = attention_forward_kernel<T, DMAX, RM, kWarps, BK>;
      allow_shared(kernel, smem);
      const unsigned grid = ceil_div(a.seq, BQ) * static_cast<unsigned>(a.heads * a.batch);
      launch("attentionForward", kernel, dim3(grid), dim3(kWarps * 32), smem, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
             c.ptr<const T>(2), c.ptr<T>(3), c.ptr<float>(4), a.batch, a.seq, a.heads, a.kv_heads, a.d, a.dv, a.q_stride,
             a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
    });
  });
}

}  // namespace

KILN_REGISTER_KERNEL("attentionForward", launch_attention_forward);

}  // namespace kiln
