// attention_backward_mma.cu: dK, dV and dQ of causal attention for bf16 and f16 on
// mma.sync.m16n8k16, headDim and vHeadDim up to 128, with every score, probability and
// gradient tile in registers (math at the top of attention.cu; D = dOut·out comes from
// attention_backward.cu's first kernel). attention_backward_tc.cu (WMMA, up to 64) runs
// instead with KILN_ATTENTION_PATH=wmma. Tiles are DP = 64 or 128 wide (the wider head
// size): Q, K (so dQ, dK) zero past headDim, V, dO (so dV) past vHeadDim. At DP 128 the
// loop tiles hold 32 rows and the block's own rows are read from shared memory for each
// product instead of being kept as fragments (registers: two 16 x 128 accumulators).
//
// dK/dV: a block of 4 warps owns 64 keys of one (kv head, batch); warp w owns keys
//   16w..16w+15, keeps K_w and V_w as A fragments (DP 64) and dK_w, dV_w as accumulators. For
//   every query head of the group and every tile of queries at or after the block's
//   first key (Q, dO, lse and D of the tile in shared memory, double buffered):
//     S^T = K_w Q^T,  dP^T = V_w dO^T                     16 x tile accumulators
//     P^T = exp2(S^T scale log2e - lse),  dS^T = P^T (dP^T - D)   (per query column)
//     dV_w += P^T dO,  dK_w += dS^T Q                     P^T, dS^T as A fragments
// dQ: a block owns 64 queries of one (head, batch); warp w owns queries 16w..16w+15,
//   keeps Q_w and dO_w as A fragments (DP 64), dQ_w as accumulators; for every tile of keys
//   at or before them (K and V double buffered): S = Q_w K^T, dP = dO_w V^T, dS as
//   above (per query row), dQ_w += dS K.
// Under a sliding window of W keys the dK/dV loop stops at the query tile holding the
// block's last key + W - 1 and the dQ loop starts at the key tile holding the block's
// first query - W + 1; with docStarts, the dK/dV loop also stops before the first query
// tile whose first row's first key (attention_tiles.h's first_key) is past the block's
// last key, and the dQ loop starts at the key tile holding the block's first row's first
// key. Pairs before a query's first key are dead like those above the diagonal. dK and
// dQ are scaled once at the end. Tiles are copied by cp.async when every row allows
// 16-byte copies (VEC), else by plain loads. Every sum runs in a fixed order:
// deterministic.
#include "attention_mma.h"

namespace kiln {
namespace {

constexpr int kBmRows = 64;

/**
 * Per tile width DP: the loop tile's rows, whether the block's own rows stay in
 * registers as fragments, and the shared memory: the block's own two tiles (64 rows),
 * then two buffers of two loop tiles and their lse, D.
 */
template <int DP>
struct BmConfig {
  static constexpr int kTile = DP <= 64 ? 64 : 32;
  static constexpr bool kFragments = DP <= 64;
  static constexpr int LD = DP + 8;
  static constexpr size_t own_bytes = size_t{kBmRows} * LD * 2;
  static constexpr size_t tile_bytes = size_t{kTile} * LD * 2;
  static constexpr size_t stats_bytes = size_t{kTile} * 4 * 3;  // lse * log2(e), D, the first keys (dK/dV with docStarts)
  static constexpr size_t buffer_bytes = 2 * tile_bytes + stats_bytes;
  static constexpr size_t total = 2 * own_bytes + 2 * buffer_bytes;
};

/** The block's own 16 rows of a warp as A: fragments loaded once (DP 64), or the shared rows themselves (DP 128). */
template <typename T, int DP, bool FRAGMENTS>
struct OwnRows;
template <typename T, int DP>
struct OwnRows<T, DP, true> {
  uint32_t f[DP / 16][4];
  __device__ OwnRows(const T* rows16, int lane) { load_a_fragments<DP>(f, rows16, lane); }
  template <int N>
  __device__ void nt(float (&acc)[N][4], const T* b, int lane) const { warp_mma_nt<T, DP, N>(acc, f, b, lane); }
};
template <typename T, int DP>
struct OwnRows<T, DP, false> {
  const T* rows;
  __device__ OwnRows(const T* rows16, int) : rows(rows16) {}
  template <int N>
  __device__ void nt(float (&acc)[N][4], const T* b, int lane) const { warp_mma_nt<T, DP, N>(acc, rows, b, lane); }
};

/**
 * Zeroes dS of a dQ tile where the key is after the row's query or before its first key, or
 * either is past the sequence: this lane's rows t_lo (x[j][0], x[j][1]) and t_hi (x[j][2],
 * x[j][3]), keys kv0 + 8 j + 2 qd and the one after. Only tiles that reach such pairs need it.
 */
template <int NS>
__device__ __forceinline__ void zero_dead_dq_pairs(float (&x)[NS][4], int kv0, int qd, int t_lo, int t_hi, int seq, int window, const int* docs) {
#pragma unroll
  for (int j = 0; j < NS; j++) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int key = kv0 + j * 8 + 2 * qd + (e & 1), t = e < 2 ? t_lo : t_hi;
      if (!(key <= t && t < seq && key < seq) || before_first_key(docs, t, key, seq, window)) x[j][e] = 0.0f;
    }
  }
}

/** Writes this lane's share of a warp's dQ rows t_lo and t_hi (those inside the sequence), times `scale`; row t at dq_head + t q_stride. */
template <typename T, int DP>
__device__ __forceinline__ void store_dq_rows(T* dq_head, int64_t q_stride, const float (&aq)[DP / 8][4], int t_lo, int t_hi, int qd, int seq, int d, float scale) {
#pragma unroll
  for (int upper = 0; upper < 2; upper++) {
    const int t = upper ? t_hi : t_lo;
    if (t < seq) store_accumulator_row<T, DP>(dq_head + t * q_stride, aq, upper, qd, d, scale);
  }
}

// DOCS: the call has docStarts. A kernel of its own, so that without them the kernel keeps the
// registers it had (DP 64 storing dS uses all of them).
template <typename T, int DP, bool VEC, bool STORE_DS = false, bool DOCS = false>
__global__ void __launch_bounds__(kMmaWarps * 32, 1)
    attention_dkdv_mma_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                              const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dk, T* __restrict__ dv_out,
                              T* __restrict__ ds_out, int batch, int seq, int heads, int kv_heads, int d, int dv, int64_t q_stride,
                              int64_t kv_stride, int64_t v_stride, int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
#if defined(KILN_ATTENTION_TC)
  using C = BmConfig<DP>;
  constexpr int kTile = C::kTile, NS = kTile / 8, LD = C::LD, TILE = kTile * LD;
  KILN_DYNAMIC_SHARED(unsigned char, smem);
  T* ks = reinterpret_cast<T*>(smem);
  T* vs = ks + kBmRows * LD;
  auto buffer = [&](int i) { return smem + 2 * C::own_bytes + i * C::buffer_bytes; };

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3, wrow = warp * 16;
  const KeyTile tile = key_tile(seq, batch, kv_heads, kBmRows);
  const int gh = tile.kv_head, b = tile.batch, kv0 = tile.row0, nk = tile.rows, group = heads / kv_heads;
  const int64_t tok0 = tile.tok0;
  const int* docs = DOCS ? doc_row(doc_starts, tok0) : nullptr;
  const float s_mul = scale * kLog2e;
  const int key_lo = kv0 + wrow + g, key_hi = key_lo + 8;  // this lane's two key rows

  // Every (query head, query tile) pair the block visits, in order: tiles from the one holding its first key
  // to the last one holding a query whose first key is at or before its last key (the stored dS: the
  // tiles the dQ pass reads, from its first row's first key on).
  const int qt0 = kv0 / kTile, per_head = key_block_query_tiles(docs, kv0, kBmRows, seq, window, kTile), steps = group * per_head;
  auto copy_step = [&](int step) {
    const int h = gh * group + step / per_head, q0 = (qt0 + step % per_head) * kTile, nq = min(kTile, seq - q0);
    unsigned char* buf = buffer(step & 1);
    T* qt = reinterpret_cast<T*>(buf);
    copy_tile<T, DP, VEC>(qt, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, kTile, nq, d);
    copy_tile<T, DP, VEC>(qt + TILE, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, kTile, nq, dv);
    const int64_t lrow = (int64_t{b} * heads + h) * seq + q0;
    float* stats = reinterpret_cast<float*>(buf + 2 * C::tile_bytes);
    load_row_stats<kMmaWarps * 32>(stats, stats + kTile, lse + lrow, dvec + lrow, kTile, nq);
    if constexpr (DOCS) {
      int* fks = reinterpret_cast<int*>(stats + 2 * kTile);
      for (int r = threadIdx.x; r < kTile; r += kMmaWarps * 32) fks[r] = first_key(docs, q0 + r, seq, window);
    }
  };

  copy_tile<T, DP, VEC>(ks, k + (tok0 + kv0) * kv_stride + int64_t{gh} * d, kv_stride, kBmRows, nk, d);
  copy_tile<T, DP, VEC>(vs, v + (tok0 + kv0) * v_stride + int64_t{gh} * dv, v_stride, kBmRows, nk, dv);
  copy_step(0);
  tile_copies_visible<VEC, 0>();
  const OwnRows<T, DP, C::kFragments> kw(ks + wrow * LD, lane), vw(vs + wrow * LD, lane);
  float ak[DP / 8][4], av[DP / 8][4];
#pragma unroll
  for (int j = 0; j < DP / 8; j++) ak[j][0] = ak[j][1] = ak[j][2] = ak[j][3] = av[j][0] = av[j][1] = av[j][2] = av[j][3] = 0.0f;

  for (int step = 0; step < steps; step++) {
    if (step + 1 < steps) copy_step(step + 1);  // into the buffer last read in step - 1
    tile_copies_visible<VEC, 1>();  // this step's tiles, not the next one's
    const int q0 = (qt0 + step % per_head) * kTile;
    const unsigned char* buf = buffer(step & 1);
    const T* qt = reinterpret_cast<const T*>(buf);
    const T* dot = qt + TILE;
    const float* ls = reinterpret_cast<const float*>(buf + 2 * C::tile_bytes);
    const float* dl = ls + kTile;
    const int* fks = reinterpret_cast<const int*>(dl + kTile);  // DOCS: the tile's queries' first keys
    // Else every query of the tile is before every key of this warp, or sees none of them (its first key
    // is past them; a warp storing dS goes on: the dQ pass reads every piece of the tiles the block visits).
    if (q0 + kTile - 1 >= kv0 + wrow && (STORE_DS || (DOCS ? fks[0] <= kv0 + wrow + 15 : !before_first_key(nullptr, q0, kv0 + wrow + 15, seq, window)))) {
      float st[NS][4], dpt[NS][4];
      kw.nt(st, qt, lane);
      vw.nt(dpt, dot, lane);
      // Column (query) 8 j + 2 qd + e of rows key_lo (st[j][e]) and key_hi (st[j][2 + e]): both rows
      // read the same two queries' statistics, one 8-byte load each of lse and D.
#pragma unroll
      for (int j = 0; j < NS; j++) {
        const float2 lse_pair = *reinterpret_cast<const float2*>(ls + j * 8 + 2 * qd), d_pair = *reinterpret_cast<const float2*>(dl + j * 8 + 2 * qd);
#pragma unroll
        for (int e = 0; e < 4; e++) p_and_ds(st[j][e], dpt[j][e], s_mul, e & 1 ? lse_pair.y : lse_pair.x, e & 1 ? d_pair.y : d_pair.x);
      }
      // Pairs with the query before the key, the key before the query's first key, or either past the
      // sequence: only in tiles that reach them (the warp's first key before the tile's last query's first key).
      if (q0 < kv0 + wrow + 15 || q0 + kTile > seq || kv0 + wrow + 16 > seq ||
          (DOCS ? kv0 + wrow < fks[kTile - 1] : before_first_key(nullptr, q0 + kTile - 1, kv0 + wrow, seq, window))) {
#pragma unroll
        for (int j = 0; j < NS; j++) {
          int2 fk_pair = make_int2(0, 0);  // DOCS: the first keys of queries 8 j + 2 qd and the one after
          if constexpr (DOCS) fk_pair = *reinterpret_cast<const int2*>(fks + j * 8 + 2 * qd);
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int query = q0 + j * 8 + 2 * qd + (e & 1), key = e < 2 ? key_lo : key_hi;
            const bool unseen = DOCS ? key < (e & 1 ? fk_pair.y : fk_pair.x) : before_first_key(nullptr, query, key, seq, window);
            if (!(query >= key && query < seq && key < seq) || unseen) st[j][e] = dpt[j][e] = 0.0f;
          }
        }
      }
      warp_mma_nn<T, DP, NS>(av, st, dot, lane);
      if constexpr (STORE_DS) {
        static_assert(kTile == kStoredDsTile && kBmRows == kStoredDsTile, "stored dS tiles are the loop tiles");
        // dS^T rounded once into the A fragments of dK's product, which also go to the dQ pass: for
        // each 16 queries (2 kc, 2 kc + 1), the 8 x 8 blocks (queries 16 kc.., keys g) (16 kc + 8.., g)
        // (16 kc.., g + 8) (16 kc + 8.., g + 8) as one 16-byte store a lane (stored_ds_piece).
        const int h = gh * group + step / per_head;
        T* tile_ds = ds_out + stored_ds_offset(b, h, heads, seq, window, q0 / kStoredDsTile, kv0 / kStoredDsTile);
        uint32_t dsf[NS / 2][4];
#pragma unroll
        for (int kc = 0; kc < NS / 2; kc++) {
          a_fragment<T>(dsf[kc], dpt, kc);
          *reinterpret_cast<uint4*>(tile_ds + stored_ds_piece(kc, warp, lane)) = make_uint4(dsf[kc][0], dsf[kc][2], dsf[kc][1], dsf[kc][3]);
        }
        warp_mma_nn_fragments<T, DP>(ak, dsf, qt, lane);
      } else {
        warp_mma_nn<T, DP, NS>(ak, dpt, qt, lane);
      }
    }
    __syncthreads();  // this buffer is free for step + 2
  }

#pragma unroll
  for (int upper = 0; upper < 2; upper++) {
    const int key = upper ? key_hi : key_lo;
    if (key >= seq) continue;
    store_accumulator_row<T, DP>(dk + (tok0 + key) * kv_stride + int64_t{gh} * d, ak, upper, qd, d, scale);
    store_accumulator_row<T, DP>(dv_out + (tok0 + key) * v_stride + int64_t{gh} * dv, av, upper, qd, dv, 1.0f);
  }
#else
  (void)dout; (void)q; (void)k; (void)v; (void)lse; (void)dvec; (void)dk; (void)dv_out; (void)ds_out; (void)batch; (void)seq; (void)heads;
  (void)kv_heads; (void)d; (void)dv; (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#endif
}

template <typename T, int DP, bool VEC>
__global__ void __launch_bounds__(kMmaWarps * 32, 1)
    attention_dq_mma_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                            const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dq, int batch, int seq,
                            int heads, int kv_heads, int d, int dv, int64_t q_stride, int64_t kv_stride, int64_t v_stride,
                            int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
#if defined(KILN_ATTENTION_TC)
  using C = BmConfig<DP>;
  constexpr int kTile = C::kTile, NS = kTile / 8, LD = C::LD, TILE = kTile * LD;
  KILN_DYNAMIC_SHARED(unsigned char, smem);
  T* qs = reinterpret_cast<T*>(smem);
  T* dos = qs + kBmRows * LD;
  auto buffer = [&](int i) { return reinterpret_cast<T*>(smem + 2 * C::own_bytes + i * C::buffer_bytes); };

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3, wrow = warp * 16;
  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, kBmRows);
  const int h = tile.head, b = tile.batch, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0, lrow = (int64_t{b} * heads + h) * seq;
  const int* docs = doc_row(doc_starts, tok0);
  const float s_mul = scale * kLog2e;
  const int t_lo = q0 + wrow + g, t_hi = t_lo + 8;  // this lane's two query rows
  const float ls_lo = t_lo < seq ? lse[lrow + t_lo] * kLog2e : 0.0f, ls_hi = t_hi < seq ? lse[lrow + t_hi] * kLog2e : 0.0f;
  const float dl_lo = t_lo < seq ? dvec[lrow + t_lo] : 0.0f, dl_hi = t_hi < seq ? dvec[lrow + t_hi] : 0.0f;
  const T* kb = k + tok0 * kv_stride + int64_t{tile.kv_head} * d;
  const T* vb = v + tok0 * v_stride + int64_t{tile.kv_head} * dv;

  const int kt0 = first_key_tile(docs, q0, seq, window, kTile), n_kt = (q0 + nq - 1) / kTile + 1;  // tiles before kt0: before every query's first key
  auto copy_keys = [&](int kt) {
    const int kv0 = kt * kTile, nk = min(kTile, seq - kv0);
    T* buf = buffer(kt & 1);
    copy_tile<T, DP, VEC>(buf, kb + int64_t{kv0} * kv_stride, kv_stride, kTile, nk, d);
    copy_tile<T, DP, VEC>(buf + TILE, vb + int64_t{kv0} * v_stride, v_stride, kTile, nk, dv);
  };
  copy_tile<T, DP, VEC>(qs, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, kBmRows, nq, d);
  copy_tile<T, DP, VEC>(dos, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, kBmRows, nq, dv);
  copy_keys(kt0);
  tile_copies_visible<VEC, 0>();
  const OwnRows<T, DP, C::kFragments> qw(qs + wrow * LD, lane), dw(dos + wrow * LD, lane);
  float aq[DP / 8][4];
#pragma unroll
  for (int j = 0; j < DP / 8; j++) aq[j][0] = aq[j][1] = aq[j][2] = aq[j][3] = 0.0f;

  for (int kt = kt0; kt < n_kt; kt++) {
    const int kv0 = kt * kTile;
    if (kt + 1 < n_kt) copy_keys(kt + 1);  // into the buffer last read in iteration kt - 1
    tile_copies_visible<VEC, 1>();  // this step's tiles, not the next one's
    const T* ks = buffer(kt & 1);
    const T* vs = ks + TILE;
    // Else every key of the tile is after every query of this warp, or before every query's first key.
    if (kv0 <= q0 + wrow + 15 && !before_first_key(docs, q0 + wrow, kv0 + kTile - 1, seq, window)) {
      float s[NS][4], dp[NS][4];
      qw.nt(s, ks, lane);
      dw.nt(dp, vs, lane);
      // Key 8 j + 2 qd + e of rows t_lo (s[j][e]) and t_hi (s[j][2 + e]).
#pragma unroll
      for (int j = 0; j < NS; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) p_and_ds(s[j][e], dp[j][e], s_mul, e < 2 ? ls_lo : ls_hi, e < 2 ? dl_lo : dl_hi);
      }
      // Pairs with the key after the query or before its first key, or either past the sequence: only in tiles
      // that reach them (P is not read again).
      if (kv0 + kTile - 1 > q0 + wrow || kv0 + kTile > seq || q0 + wrow + 16 > seq || before_first_key(docs, q0 + wrow + 15, kv0, seq, window))
        zero_dead_dq_pairs(dp, kv0, qd, t_lo, t_hi, seq, window, docs);
      warp_mma_nn<T, DP, NS>(aq, dp, ks, lane);
    }
    __syncthreads();  // this buffer is free for tile kt + 2
  }
  store_dq_rows<T, DP>(dq + tok0 * q_stride + int64_t{h} * d, q_stride, aq, t_lo, t_hi, qd, seq, d, scale);
#else
  (void)dout; (void)q; (void)k; (void)v; (void)lse; (void)dvec; (void)dq; (void)batch; (void)seq; (void)heads; (void)kv_heads;
  (void)d; (void)dv; (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#endif
}

/**
 * dQ from the stored dS (KILN_ATTENTION_DQ=stored-ds, heads up to 64): a block owns 64
 * queries of one (head, batch) as the dQ kernel above does; for every key tile at or before
 * them, K's tile by double-buffered copies, each warp's 16 x 64 rows of dS from the stored
 * tile straight into A fragments (a 16-byte load a lane for 16 keys, transposed by
 * movmatrix; dead pairs are zeros there already), and dQ_w += dS K. One product a tile
 * instead of three, and no exponentials.
 */
template <typename T, bool VEC>
__global__ void __launch_bounds__(kMmaWarps * 32, 1)
    attention_dq_from_ds_mma_kernel(const T* __restrict__ k, const T* __restrict__ ds, T* __restrict__ dq, int batch, int seq, int heads,
                                    int kv_heads, int d, int64_t q_stride, int64_t kv_stride, float scale, int window,
                                    const int* __restrict__ doc_starts) {
#if defined(KILN_ATTENTION_TC)
  constexpr int DP = 64, kTile = kStoredDsTile, NS = kTile / 8, LD = DP + 8, TILE = kTile * LD;
  KILN_DYNAMIC_SHARED(T, kbuf);  // two K tiles
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3, wrow = warp * 16;
  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, kBmRows);
  const int h = tile.head, b = tile.batch, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0;
  const int* docs = doc_row(doc_starts, tok0);
  const int t_lo = q0 + wrow + g, t_hi = t_lo + 8;  // this lane's two query rows
  const T* kb = k + tok0 * kv_stride + int64_t{tile.kv_head} * d;
  // The key tiles of query tile q0 / kTile's row of the stored dS, which lie one after another from row_ds.
  const int kt0 = first_key_tile(docs, q0, seq, window, kTile), n_kt = (q0 + nq - 1) / kTile + 1;
  const T* row_ds = ds + stored_ds_offset(b, h, heads, seq, window, q0 / kTile, kt0);
  auto copy_keys = [&](int kt) {
    const int kv0 = kt * kTile;
    copy_tile<T, DP, VEC>(kbuf + (kt & 1) * TILE, kb + int64_t{kv0} * kv_stride, kv_stride, kTile, min(kTile, seq - kv0), d);
  };
  copy_keys(kt0);
  tile_copies_visible<VEC, 0>();
  float aq[DP / 8][4];
#pragma unroll
  for (int j = 0; j < DP / 8; j++) aq[j][0] = aq[j][1] = aq[j][2] = aq[j][3] = 0.0f;

  for (int kt = kt0; kt < n_kt; kt++) {
    const int kv0 = kt * kTile;
    if (kt + 1 < n_kt) copy_keys(kt + 1);  // into the buffer last read in iteration kt - 1
    tile_copies_visible<VEC, 1>();
    // Else every key of the tile is after every query of this warp (pieces before a warp's first keys are
    // zeros and multiplied as they are: a test for them would cost the kernel registers).
    if (kv0 <= q0 + wrow + 15) {
      const T* tile_ds = row_ds + int64_t{kt - kt0} * (kTile * kTile);
      // Each 16 keys' piece, one 16-byte load a lane, its four 8 x 8 blocks of dS^T transposed: the
      // A fragment of dS for those keys (rows g, g + 8; keys 2 qd.., 8 + 2 qd..). Dead pairs (a key
      // after its query or before its first key, either past the sequence) hold zeros, as the dK/dV pass
      // wrote them.
      uint32_t dsf[NS / 2][4];
#pragma unroll
      for (int kk = 0; kk < NS / 2; kk++) {
        const uint4 piece = *reinterpret_cast<const uint4*>(tile_ds + stored_ds_piece(warp, kk, lane));
        dsf[kk][0] = ptx::movmatrix_trans(piece.x);
        dsf[kk][1] = ptx::movmatrix_trans(piece.y);
        dsf[kk][2] = ptx::movmatrix_trans(piece.z);
        dsf[kk][3] = ptx::movmatrix_trans(piece.w);
      }
      warp_mma_nn_fragments<T, DP>(aq, dsf, kbuf + (kt & 1) * TILE, lane);
    }
    __syncthreads();  // this buffer is free for tile kt + 2
  }
  store_dq_rows<T, DP>(dq + tok0 * q_stride + int64_t{h} * d, q_stride, aq, t_lo, t_hi, qd, seq, d, scale);
#else
  (void)k; (void)ds; (void)dq; (void)batch; (void)seq; (void)heads; (void)kv_heads; (void)d; (void)q_stride; (void)kv_stride; (void)scale;
  (void)window; (void)doc_starts;
#endif
}

template <typename T, int DP, bool VEC>
void launch_backward_mma(const KernelCall& c, const Args& a, const float* dvec) {
  constexpr size_t smem = BmConfig<DP>::total;
  // KILN_ATTENTION_DQ=stored-ds: the dK/dV pass also stores dS (after D in the backward's scratch) and the dQ pass multiplies it by K.
  bool stored = false;
  const bool docs = a.doc_starts != nullptr;
  auto dkdv = docs ? attention_dkdv_mma_kernel<T, DP, VEC, false, true> : attention_dkdv_mma_kernel<T, DP, VEC>;
  if constexpr (DP == kStoredDsTile) {
    stored = stored_ds_wanted(c, a);
    if (stored) dkdv = docs ? attention_dkdv_mma_kernel<T, DP, VEC, true, true> : attention_dkdv_mma_kernel<T, DP, VEC, true>;
  }
  T* ds = stored ? stored_ds_of<T>(dvec, a) : nullptr;
  const unsigned kv_grid = ceil_div(a.seq, kBmRows) * static_cast<unsigned>(a.kv_heads * a.batch);
  allow_shared(dkdv, smem);
  launch("attentionBackward", dkdv, dim3(kv_grid), dim3(kMmaWarps * 32), smem, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<const T>(3), c.ptr<const float>(5), dvec, c.ptr<T>(7), c.ptr<T>(8), ds, a.batch, a.seq, a.heads,
         a.kv_heads, a.d, a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
  const unsigned q_grid = ceil_div(a.seq, kBmRows) * static_cast<unsigned>(a.heads * a.batch);
  if constexpr (DP == kStoredDsTile) {
    if (stored) {
      constexpr size_t dq_smem = size_t{2} * kStoredDsTile * (DP + 8) * sizeof(T);  // two K tiles
      launch("attentionBackward", attention_dq_from_ds_mma_kernel<T, VEC>, dim3(q_grid), dim3(kMmaWarps * 32), dq_smem, c.stream,
             c.ptr<const T>(2), static_cast<const T*>(ds), c.ptr<T>(6), a.batch, a.seq, a.heads, a.kv_heads, a.d, a.q_stride, a.kv_stride, a.scale,
             a.window, a.doc_starts);
      return;
    }
  }
  auto dqk = attention_dq_mma_kernel<T, DP, VEC>;
  allow_shared(dqk, smem);
  launch("attentionBackward", dqk, dim3(q_grid), dim3(kMmaWarps * 32), smem, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<const T>(3), c.ptr<const float>(5), dvec, c.ptr<T>(6), a.batch, a.seq, a.heads, a.kv_heads, a.d,
         a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
}

template <typename T, int DP>
void launch_backward_mma(const KernelCall& c, const Args& a, const float* dvec) {
  // dOut, q, k and v are copied.
  const bool vec = allows_16_byte_copies(c, {0, 1, 2, 3}, {a.d, a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride});
  if (vec) launch_backward_mma<T, DP, true>(c, a, dvec);
  else launch_backward_mma<T, DP, false>(c, a, dvec);
}

template <typename T>
void launch_backward_mma(const KernelCall& c, const Args& a, const float* dvec) {
  if (a.d_max() <= 64) launch_backward_mma<T, 64>(c, a, dvec);
  else launch_backward_mma<T, 128>(c, a, dvec);
}

}  // namespace

bool launch_attention_backward_mma(const KernelCall& c, const float* dvec) {
  const Args a = read_args(c, kBackwardOperands);
  if (c.wmma_attention || !attention_tc_allowed(c, a.dtype, a.d_max())) return false;
  if (a.dtype == kBF16) launch_backward_mma<__nv_bfloat16>(c, a, dvec);
  else launch_backward_mma<__half>(c, a, dvec);
  return true;
}

}  // namespace kiln
