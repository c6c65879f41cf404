// attention_backward_tc.cu: dK, dV and dQ of causal attention on tensor cores through
// WMMA, for bf16 and f16 with headDim and vHeadDim up to 64 (the mma.sync kernels of
// attention_backward_mma.cu take every call this one takes; this one runs with
// KILN_ATTENTION_PATH=wmma) (math at the top of attention.cu;
// D = dOut·out comes from attention_backward.cu's first kernel, which also runs the
// f32 kernels for every other case). Products go through attention_tc.h's warp
// products. A value head size apart from the query/key one (MLA) runs here too: tiles
// are DP wide for the wider, Q, K (so dQ, dK) zero past headDim, V, dO (so dV) past vHeadDim.
//
// dK/dV: a block of 4 warps owns 64 keys of one (kv head, batch); warp w owns keys
//   16w..16w+15 and keeps their dK, dV in accumulator fragments. For every query
//   head of the group and every tile of 32 queries at or after the block's keys:
//     S^T = K_w Q^T,  dP^T = V_w dO^T             (16 x 32, f32 in shared memory)
//     P^T = exp2(S^T scale log2e - lse),  dS^T = P^T (dP^T - D)   (lane pair per key row, to T)
//     dV_w += P^T dO,  dK_w += dS^T Q             (fragments; dK scaled once at the end)
// dQ: a block owns 64 queries of one (head, batch); warp w owns queries 16w..; for
//   every tile of 32 keys at or before them: S = Q_w K^T, dP = dO_w V^T, dS as above,
//   dQ_w += dS K; dQ scaled once at the end.
// Shared memory per block: the block's own rows (K and V, or Q and dO: 64 x DP of T),
// the loop's tile (32 x DP of T, two of them), lse and D of the tile or block rows,
// two f32 16 x 32 strips and two T strips per warp; the staging of the final rows
// reuses the loop's space. Every sum runs in a fixed order: deterministic.
#include "attention_tc.h"

namespace kiln {
namespace {

constexpr int kBwRows = 64, kBwTile = 32;

template <int DP>
struct BwLayout {
  static constexpr int LQ = DP + 8, LS = kBwTile + 4, LP = kBwTile + 8;
  static constexpr size_t own_bytes = size_t{kBwRows} * LQ * 2;  // one of the block's two row tiles
  static constexpr size_t tile_bytes = size_t{kBwTile} * LQ * 2;  // one of the loop's two tiles
  static constexpr size_t vec_bytes = size_t{kBwRows} * 4;        // lse or D
  static constexpr size_t f32_bytes = size_t{kBwRows} * LS * 4;   // S or dP strips of every warp
  static constexpr size_t t_bytes = size_t{kBwRows} * LP * 2;     // P or dS strips of every warp
  static constexpr size_t loop_bytes = 2 * tile_bytes + 2 * f32_bytes + 2 * t_bytes;
  static constexpr size_t stage_bytes = size_t{kBwRows} * (DP + 4) * 4;
  static constexpr size_t total = 2 * own_bytes + 2 * vec_bytes + (loop_bytes > stage_bytes ? loop_bytes : stage_bytes);
};

/** The shared-memory regions of both backward kernels. */
template <typename T, int DP>
struct BwShared {
  T *own0, *own1, *tile0, *tile1, *st, *dst;
  float *vec0, *vec1, *s, *dp, *stage;
  __device__ explicit BwShared(unsigned char* m) {
    using L = BwLayout<DP>;
    own0 = reinterpret_cast<T*>(m);
    own1 = reinterpret_cast<T*>(m + L::own_bytes);
    vec0 = reinterpret_cast<float*>(m + 2 * L::own_bytes);
    vec1 = reinterpret_cast<float*>(m + 2 * L::own_bytes + L::vec_bytes);
    unsigned char* loop = m + 2 * L::own_bytes + 2 * L::vec_bytes;
    tile0 = reinterpret_cast<T*>(loop);
    tile1 = reinterpret_cast<T*>(loop + L::tile_bytes);
    s = reinterpret_cast<float*>(loop + 2 * L::tile_bytes);
    dp = reinterpret_cast<float*>(loop + 2 * L::tile_bytes + L::f32_bytes);
    st = reinterpret_cast<T*>(loop + 2 * L::tile_bytes + 2 * L::f32_bytes);
    dst = reinterpret_cast<T*>(loop + 2 * L::tile_bytes + 2 * L::f32_bytes + L::t_bytes);
    stage = reinterpret_cast<float*>(loop);  // after the loop
  }
};

#if defined(KILN_ATTENTION_TC)
/**
 * p and ds of one lane's 16 columns of its row (lane pair per row) from the warp's S
 * and dP strips; `key_of`/`query_of` give the key and query of a (row, column).
 */
template <typename T, typename Pos>
__device__ __forceinline__ void p_and_ds(const float* s, const float* dp, T* p_out, T* ds_out, int row, int half, float s_mul,
                                         const float* lse_log2, const float* dvec, int seq, int window, const int* docs, Pos pos) {
  constexpr int LS = kBwTile + 4, LP = kBwTile + 8;
#pragma unroll
  for (int c = half * 16; c < half * 16 + 16; c++) {
    int key, query, vi;  // vi: index of the query's lse and D
    pos(row, c, key, query, vi);
    const bool live = query >= key && query < seq && key < seq && !before_first_key(docs, query, key, seq, window);
    const float p = live ? exp2f(s[row * LS + c] * s_mul - lse_log2[vi]) : 0.0f;
    p_out[row * LP + c] = from_f32<T>(p);
    ds_out[row * LP + c] = from_f32<T>(p * (dp[row * LS + c] - dvec[vi]));
  }
}
#endif

template <typename T, int DP>
__global__ void __launch_bounds__(kTcWarps * 32, 1)
    attention_dkdv_tc_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                             const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dk, T* __restrict__ dv_out,
                             int batch, int seq, int heads, int kv_heads, int d, int dv, int64_t q_stride, int64_t kv_stride,
                             int64_t v_stride, int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
#if defined(KILN_ATTENTION_TC)
  using namespace nvcuda;
  using L = BwLayout<DP>;
  KILN_DYNAMIC_SHARED(unsigned char, smem);
  const BwShared<T, DP> sh(smem);
  T *ks = sh.own0, *vs = sh.own1, *qs = sh.tile0, *dos = sh.tile1;
  float *ls = sh.vec0, *dl = sh.vec1;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1, wrow = warp * 16;
  const KeyTile tile = key_tile(seq, batch, kv_heads, kBwRows);
  const int g = tile.kv_head, b = tile.batch, kv0 = tile.row0, nk = tile.rows, group = heads / kv_heads;
  const int64_t tok0 = tile.tok0;
  const int* docs = doc_row(doc_starts, tok0);
  const float s_mul = scale * kLog2e;

  load_tile_t<T, DP>(ks, L::LQ, k + (tok0 + kv0) * kv_stride + int64_t{g} * d, kv_stride, kBwRows, nk, d);
  load_tile_t<T, DP>(vs, L::LQ, v + (tok0 + kv0) * v_stride + int64_t{g} * dv, v_stride, kBwRows, nk, dv);

  TcAccumulator ak[DP / 16], av[DP / 16];
#pragma unroll
  for (int j = 0; j < DP / 16; j++) {
    wmma::fill_fragment(ak[j], 0.0f);
    wmma::fill_fragment(av[j], 0.0f);
  }

  // Query tiles from the one holding the block's first key to the last one whose queries see its keys.
  const int qt0 = kv0 / kBwTile, n_qt = qt0 + key_block_query_tiles(docs, kv0, kBwRows, seq, window, kBwTile);
  for (int hh = 0; hh < group; hh++) {
    const int h = g * group + hh;
    const int64_t lrow = (int64_t{b} * heads + h) * seq;
    for (int qt = qt0; qt < n_qt; qt++) {
      const int q0 = qt * kBwTile, nq = min(kBwTile, seq - q0);
      __syncthreads();  // the previous query tile is no longer read
      load_tile_t<T, DP>(qs, L::LQ, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, kBwTile, nq, d);
      load_tile_t<T, DP>(dos, L::LQ, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, kBwTile, nq, dv);
      load_row_stats<kTcWarps * 32>(ls, dl, lse + lrow + q0, dvec + lrow + q0, kBwTile, nq);
      __syncthreads();
      // Every query of the tile is before every key of this warp, or sees none of them (its first key is past them).
      if (q0 + kBwTile - 1 < kv0 + wrow || before_first_key(docs, q0, kv0 + wrow + 15, seq, window)) continue;

      float* sw = sh.s + wrow * L::LS;
      float* dpw = sh.dp + wrow * L::LS;
      T* pw = sh.st + wrow * L::LP;
      T* dsw = sh.dst + wrow * L::LP;
      warp_product_nt<T, DP, kBwTile>(sw, L::LS, ks + wrow * L::LQ, L::LQ, qs, L::LQ);
      warp_product_nt<T, DP, kBwTile>(dpw, L::LS, vs + wrow * L::LQ, L::LQ, dos, L::LQ);
      __syncwarp();
      p_and_ds<T>(sw, dpw, pw, dsw, r, half, s_mul, ls, dl, seq, window, docs, [&](int row, int col, int& key, int& query, int& vi) {
        key = kv0 + wrow + row;
        query = q0 + col;
        vi = col;
      });
      __syncwarp();
      warp_product_nn<T, kBwTile, DP / 16>(av, pw, L::LP, dos, L::LQ);
      warp_product_nn<T, kBwTile, DP / 16>(ak, dsw, L::LP, qs, L::LQ);
    }
  }

  __syncthreads();  // the loop's space becomes the staging rows
  const int valid = max(0, min(16, nk - wrow));
  float* stage = sh.stage + wrow * (DP + 4);
  const int64_t tok = tok0 + kv0 + wrow;
  warp_store_rows<T, DP / 16>(dk + tok * kv_stride + int64_t{g} * d, kv_stride, valid, d, ak, stage, scale);
  warp_store_rows<T, DP / 16>(dv_out + tok * v_stride + int64_t{g} * dv, v_stride, valid, dv, av, stage, 1.0f);
#else
  (void)dout; (void)q; (void)k; (void)v; (void)lse; (void)dvec; (void)dk; (void)dv_out; (void)batch; (void)seq; (void)heads;
  (void)kv_heads; (void)d; (void)dv; (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#endif
}

template <typename T, int DP>
__global__ void __launch_bounds__(kTcWarps * 32, 1)
    attention_dq_tc_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                           const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dq, int batch, int seq,
                           int heads, int kv_heads, int d, int dv, int64_t q_stride, int64_t kv_stride, int64_t v_stride,
                           int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
#if defined(KILN_ATTENTION_TC)
  using namespace nvcuda;
  using L = BwLayout<DP>;
  KILN_DYNAMIC_SHARED(unsigned char, smem);
  const BwShared<T, DP> sh(smem);
  T *qs = sh.own0, *dos = sh.own1, *ks = sh.tile0, *vs = sh.tile1;
  float *ls = sh.vec0, *dl = sh.vec1;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1, wrow = warp * 16;
  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, kBwRows);
  const int h = tile.head, b = tile.batch, g = tile.kv_head, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0, lrow = (int64_t{b} * heads + h) * seq;
  const int* docs = doc_row(doc_starts, tok0);
  const float s_mul = scale * kLog2e;

  load_tile_t<T, DP>(qs, L::LQ, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, kBwRows, nq, d);
  load_tile_t<T, DP>(dos, L::LQ, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, kBwRows, nq, dv);
  load_row_stats<kTcWarps * 32>(ls, dl, lse + lrow + q0, dvec + lrow + q0, kBwRows, nq);
  const T* kb = k + tok0 * kv_stride + int64_t{g} * d;
  const T* vb = v + tok0 * v_stride + int64_t{g} * dv;

  TcAccumulator aq[DP / 16];
#pragma unroll
  for (int j = 0; j < DP / 16; j++) wmma::fill_fragment(aq[j], 0.0f);

  const int n_kt = (q0 + nq - 1) / kBwTile + 1;
  for (int kt = first_key_tile(docs, q0, seq, window, kBwTile); kt < n_kt; kt++) {
    const int kv0 = kt * kBwTile, nk = min(kBwTile, seq - kv0);
    __syncthreads();  // the previous key tile is no longer read (and the block's rows are in place)
    load_tile_t<T, DP>(ks, L::LQ, kb + int64_t{kv0} * kv_stride, kv_stride, kBwTile, nk, d);
    load_tile_t<T, DP>(vs, L::LQ, vb + int64_t{kv0} * v_stride, v_stride, kBwTile, nk, dv);
    __syncthreads();
    // Every key of the tile is after every query of this warp, or before every query's first key.
    if (kv0 > q0 + wrow + 15 || before_first_key(docs, q0 + wrow, kv0 + kBwTile - 1, seq, window)) continue;

    float* sw = sh.s + wrow * L::LS;
    float* dpw = sh.dp + wrow * L::LS;
    T* pw = sh.st + wrow * L::LP;
    T* dsw = sh.dst + wrow * L::LP;
    warp_product_nt<T, DP, kBwTile>(sw, L::LS, qs + wrow * L::LQ, L::LQ, ks, L::LQ);
    warp_product_nt<T, DP, kBwTile>(dpw, L::LS, dos + wrow * L::LQ, L::LQ, vs, L::LQ);
    __syncwarp();
    p_and_ds<T>(sw, dpw, pw, dsw, r, half, s_mul, ls + wrow, dl + wrow, seq, window, docs, [&](int row, int col, int& key, int& query, int& vi) {
      key = kv0 + col;
      query = q0 + wrow + row;
      vi = row;
    });
    __syncwarp();
    warp_product_nn<T, kBwTile, DP / 16>(aq, dsw, L::LP, ks, L::LQ);
  }

  __syncthreads();  // the loop's space becomes the staging rows
  const int valid = max(0, min(16, nq - wrow));
  const int64_t off = (tok0 + q0 + wrow) * q_stride + int64_t{h} * d;
  warp_store_rows<T, DP / 16>(dq + off, q_stride, valid, d, aq, sh.stage + wrow * (DP + 4), scale);
#else
  (void)dout; (void)q; (void)k; (void)v; (void)lse; (void)dvec; (void)dq; (void)batch; (void)seq; (void)heads; (void)kv_heads;
  (void)d; (void)dv; (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#endif
}

template <typename T, int DP>
void launch_backward_tc(const KernelCall& c, const Args& a, const float* dvec) {
  using L = BwLayout<DP>;
  const unsigned kv_grid = ceil_div(a.seq, kBwRows) * static_cast<unsigned>(a.kv_heads * a.batch);
  auto dkdv = attention_dkdv_tc_kernel<T, DP>;
  allow_shared(dkdv, L::total);
  launch("attentionBackward", dkdv, dim3(kv_grid), dim3(kTcWarps * 32), L::total, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<const T>(3), c.ptr<const float>(5), dvec, c.ptr<T>(7), c.ptr<T>(8), a.batch, a.seq, a.heads, a.kv_heads,
         a.d, a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
  const unsigned q_grid = ceil_div(a.seq, kBwRows) * static_cast<unsigned>(a.heads * a.batch);
  auto dqk = attention_dq_tc_kernel<T, DP>;
  allow_shared(dqk, L::total);
  launch("attentionBackward", dqk, dim3(q_grid), dim3(kTcWarps * 32), L::total, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<const T>(3), c.ptr<const float>(5), dvec, c.ptr<T>(6), a.batch, a.seq, a.heads, a.kv_heads, a.d,
         a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
}

}  // namespace

bool launch_attention_backward_tensor_cores(const KernelCall& c, const float* dvec) {
  if (launch_attention_backward_wgmma(c, dvec) || launch_attention_backward_mma(c, dvec)) return true;
  const Args a = read_args(c, kBackwardOperands);
  // Up to 64: a warp's dK and dV fragments for 128 columns would not fit in registers.
  if (!attention_tc_allowed(c, a.dtype, a.d_max()) || a.d_max() > 64) return false;
  if (a.dtype == kBF16) launch_backward_tc<__nv_bfloat16, 64>(c, a, dvec);
  else launch_backward_tc<__half, 64>(c, a, dvec);
  return true;
}

}  // namespace kiln
