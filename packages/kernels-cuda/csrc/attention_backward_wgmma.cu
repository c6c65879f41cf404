// attention_backward_wgmma.cu: dK, dV and dQ of causal attention for bf16 and f16 on
// Hopper's warpgroup instruction (wgmma.mma_async, sm_90a; the simulator emulates it),
// with KILN_ATTENTION_PATH=wgmma on an sm_90 device (opt-in until a GPU has measured it).
// The same two passes as attention_backward_mma.cu (math at the top of attention.cu;
// D = dOut·out from attention_backward.cu's first kernel), each product one warpgroup's
// wgmma, so a loop tile is read from shared memory once per 64 rows instead of once per
// 16. It takes what the mma.sync kernels take when every row and head offset allows
// 16-byte copies: headDim and vHeadDim up to 128, multiples of 8; tiles DP = 64 or 128
// wide (the wider head size), Q, K (so dQ, dK) zero past headDim, V, dO (so dV) past
// vHeadDim. Tiles and descriptor steps as attention_wgmma.h has them.
//
// A block is NWG warpgroups (attention_wgmma.h: 1 by default, 2 with
// KILN_ATTENTION_WGMMA_ROWS=128 and always at head sizes above 64), 64 NWG own rows.
// dK/dV: a block owns 64 NWG keys of one (kv head, batch), warpgroup g keys
//   64 g .. 64 g + 63 (K_g, V_g stay in shared memory as A operands). For every query
//   head of the group and every tile of 64 queries at or after the block's first key
//   (Q, dO, lse and D of the tile in shared memory, double buffered):
//     S^T = K_g Q^T,  dP^T = V_g dO^T          wgmma m64n64k16, Q and dO K-major
//     P^T = exp2(S^T scale log2e - lse),  dS^T = P^T (dP^T - D)   (per query column)
//     dV_g += P^T dO,  dK_g += dS^T Q           P^T, dS^T as register A operands, dO
//                                               and Q MN-major (their rows are the k axis)
// dQ: a block owns 64 NWG queries of one (head, batch), warpgroup g queries 64 g ..; for
//   every tile of 64 keys at or before them (K and V double buffered): S = Q_g K^T,
//   dP = dO_g V^T, dS as above (per query row), dQ_g += dS K (K MN-major).
// Under a sliding window or with docStarts the loops skip the tiles with no live pair as
// attention_backward_mma.cu's do; backward calls with docStarts above head size 64 take
// the mma.sync kernels (launch_attention_backward_wgmma). dK and dQ are scaled once at
// the end. Every output element has one writer and every sum runs in a fixed order:
// deterministic, the same for any block order.
#include "attention_wgmma.h"

namespace kiln {
namespace {

template <int DP, int NWG>
struct WgBackwardLayout {
  static constexpr int NT = 128 * NWG;  // threads of a block
  static constexpr int OWN = 64 * NWG;  // the block's own rows (keys for dK/dV, queries for dQ): 64 a warpgroup
  static constexpr int TILE = 64;  // rows of a loop tile (queries for dK/dV, keys for dQ)
  using OwnTile = Sw128Tile<OWN, DP / 8>;
  using LoopTile = Sw128Tile<TILE, DP / 8>;
  static constexpr size_t own_bytes = size_t{OwnTile::kElems} * 2, tile_bytes = size_t{LoopTile::kElems} * 2;
  static_assert(own_bytes % 1024 == 0 && tile_bytes % 1024 == 0, "every tile starts on a 1024-byte swizzle atom");
  static constexpr size_t stats_bytes = TILE * 4 * 2;  // a query tile's lse * log2(e), then D (dK/dV)
  // The own tiles, two buffers of two loop tiles, two buffers of stats, the alignment of the first atom.
  static constexpr size_t total = 2 * own_bytes + 4 * tile_bytes + 2 * stats_bytes + 1024;
};

/** Row `hf` (0: row lo, 1: row lo + 8) of a warpgroup's 64 x DP accumulator fragment, times mul, into columns < d of `dst`. */
template <typename T, int DP>
__device__ __forceinline__ void store_fragment_row(T* dst, const float (&acc)[DP / 2], int hf, int qd, int d, float mul) {
#pragma unroll
  for (int j = 0; j < DP / 8; j++) {
    const int c = 8 * j + 2 * qd;
    if (c < d) dst[c] = from_f32<T>(acc[4 * j + 2 * hf] * mul);
    if (c + 1 < d) dst[c + 1] = from_f32<T>(acc[4 * j + 2 * hf + 1] * mul);
  }
}

/**
 * The descriptors a pass reads through: this warpgroup's 64 rows of its two own tiles
 * (K and V, or Q and dO), and the two tiles of loop buffer 0 (buffer 1's are these
 * plus a fixed offset). The same descriptor serves K-major and MN-major reads.
 */
struct PassDescriptors {
  uint64_t own1, own2, loop1, loop2;
};

template <typename OwnTile, typename LoopTile, typename T>
__device__ __forceinline__ PassDescriptors pass_descriptors(const T* own1, const T* own2, const T* loop, int wg) {
  return {tile_descriptor<OwnTile>(own1 + wg * 64 * 64), tile_descriptor<OwnTile>(own2 + wg * 64 * 64), tile_descriptor<LoopTile>(loop),
          tile_descriptor<LoopTile>(loop + LoopTile::kElems)};
}

// DOCS: the call has docStarts. A kernel of its own, so that without them the widest tiles
// (254 registers at DP 128) keep the code they had.
template <typename T, int DP, int NWG, bool DOCS>
__global__ void __launch_bounds__(128 * NWG, 1)
    attention_dkdv_wgmma_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dk, T* __restrict__ dv_out,
                                int batch, int seq, int heads, int kv_heads, int d, int dv, int64_t q_stride, int64_t kv_stride,
                                int64_t v_stride, int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
#if defined(KILN_HAS_WGMMA)
  using L = WgBackwardLayout<DP, NWG>;
  using OwnTile = typename L::OwnTile;
  using LoopTile = typename L::LoopTile;
  constexpr int OWN = L::OWN, TILE = L::TILE, NT = L::NT;
  KILN_DYNAMIC_SHARED(unsigned char, smem_raw);
  T* ks = aligned_shared<T>(smem_raw);
  T* vs = ks + OwnTile::kElems;
  T* tiles = vs + OwnTile::kElems;                                  // buffer i: Q at tiles + 2 i LoopTile::kElems, dO after it
  float* stats = reinterpret_cast<float*>(tiles + 4 * LoopTile::kElems);  // buffer i: lse * log2(e) at stats + 2 i TILE, D after it

  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, qd = lane & 3;
  const KeyTile tile = key_tile(seq, batch, kv_heads, OWN);
  const int gh = tile.kv_head, b = tile.batch, kv0 = tile.row0, nk = tile.rows, group = heads / kv_heads;
  const int64_t tok0 = tile.tok0;
  const int* docs = DOCS ? doc_row(doc_starts, tok0) : nullptr;
  const float s_mul = scale * kLog2e;
  const int wg_first = kv0 + 64 * wg;                            // this warpgroup's first key
  const int key_lo = wg_first + 16 * warp + (lane >> 2), key_hi = key_lo + 8;  // this thread's two key rows

  // Every (query head, query tile) pair the block visits, in order: tiles from the one holding its first key
  // to the last one holding a query whose first key is at or before its last key.
  const int qt0 = kv0 / TILE, per_head = key_block_query_tiles(docs, kv0, OWN, seq, window, TILE), steps = group * per_head;
  auto copy_step = [&](int step) {
    const int h = gh * group + step / per_head, q0 = (qt0 + step % per_head) * TILE, nq = min(TILE, seq - q0);
    T* buf = tiles + (step & 1) * 2 * LoopTile::kElems;
    copy_sw128<T, LoopTile, TILE, DP, NT>(buf, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, nq, d);
    copy_sw128<T, LoopTile, TILE, DP, NT>(buf + LoopTile::kElems, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, nq, dv);
    const int64_t lrow = (int64_t{b} * heads + h) * seq + q0;
    float* st = stats + (step & 1) * 2 * TILE;
    load_row_stats<NT>(st, st + TILE, lse + lrow, dvec + lrow, TILE, nq);
  };

  copy_sw128<T, OwnTile, OWN, DP, NT>(ks, k + (tok0 + kv0) * kv_stride + int64_t{gh} * d, kv_stride, nk, d);
  copy_sw128<T, OwnTile, OWN, DP, NT>(vs, v + (tok0 + kv0) * v_stride + int64_t{gh} * dv, v_stride, nk, dv);
  copy_step(0);
  ptx::cp_async_commit();

  // This warpgroup's 64 keys of K and V; Q and dO of buffer 0.
  const auto [desc_k, desc_v, desc_q0, desc_do0] = pass_descriptors<OwnTile, LoopTile>(ks, vs, tiles, wg);

  float adk[DP / 2], adv[DP / 2];
#pragma unroll
  for (int i = 0; i < DP / 2; i++) adk[i] = adv[i] = 0.0f;

  for (int step = 0; step < steps; step++) {
    if (step + 1 < steps) copy_step(step + 1);  // into the buffer read in step - 1 (freed by its closing barrier)
    commit_and_land_all_but_newest();           // this step's tiles (and K, V) and stats, everyone's
    const int q0 = (qt0 + step % per_head) * TILE;
    // Uniform in the warpgroup: else every query is before every key or sees none of them, or no key is real.
    if (q0 + TILE - 1 >= wg_first && wg_first < seq && !before_first_key(docs, q0, wg_first + 63, seq, window)) {
      const uint64_t buf = (step & 1) * ((2 * L::tile_bytes) >> 4);  // descriptor start units of this step's buffer
      float st[TILE / 2], dpt[TILE / 2];  // S^T = K_g Q^T, dP^T = V_g dO^T
      score_products<T, DP, OwnTile, LoopTile>(st, dpt, desc_k, desc_q0 + buf, desc_v, desc_do0 + buf);

      // Register 4 j + 2 hf + e: key row hf ? key_hi : key_lo, query column c = 8 j + 2 qd + e of the tile.
      const float* ls = stats + (step & 1) * 2 * TILE;
      const float* dl = ls + TILE;
      // Both key rows of a lane take the same two queries' lse and D: one 8-byte load each per 8 queries.
#pragma unroll
      for (int j = 0; j < TILE / 8; j++) {
        const float2 lse_pair = *reinterpret_cast<const float2*>(ls + 8 * j + 2 * qd), d_pair = *reinterpret_cast<const float2*>(dl + 8 * j + 2 * qd);
#pragma unroll
        for (int e = 0; e < 4; e++) p_and_ds(st[4 * j + e], dpt[4 * j + e], s_mul, e & 1 ? lse_pair.y : lse_pair.x, e & 1 ? d_pair.y : d_pair.x);
      }
      // Pairs with the query before the key, the key before the query's first key, or either past the
      // sequence: only in tiles that reach them (the warpgroup's first key before the tile's last query's first key).
      if (q0 < wg_first + 63 || q0 + TILE > seq || wg_first + 64 > seq || before_first_key(docs, q0 + TILE - 1, wg_first, seq, window)) {
#pragma unroll
        for (int i = 0; i < TILE / 2; i++) {
          const int query = q0 + 8 * (i >> 2) + 2 * qd + (i & 1), key = (i >> 1) & 1 ? key_hi : key_lo;
          if (!(query >= key && query < seq && key < seq) || before_first_key(docs, query, key, seq, window)) st[i] = dpt[i] = 0.0f;
        }
      }

      // dV_g += P^T dO, then dK_g += dS^T Q: P^T's fragments are made (and S^T's registers
      // freed) before dS^T's, which keeps the widest tiles (DP 128) within the registers.
      uint32_t pa[TILE / 16][4], da[TILE / 16][4];
      accumulator_tile_as_a<T>(pa, st);
      register_a_products<T>(adv, pa, desc_do0 + buf);
      accumulator_tile_as_a<T>(da, dpt);
      register_a_products<T>(adk, da, desc_q0 + buf);  // fenced again: da was written since
      release_operands(pa);
      release_operands(da);
      ptx::accumulator_fence(adv);
      wgmma_commit_and_wait(adk);
      ptx::accumulator_fence(adv);
    }
    __syncthreads();  // this buffer is free for step + 2
  }
  ptx::cp_async_wait<0>();  // only empty groups are left

#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const int key = hf ? key_hi : key_lo;
    if (key >= seq) continue;
    store_fragment_row<T, DP>(dk + (tok0 + key) * kv_stride + int64_t{gh} * d, adk, hf, qd, d, scale);
    store_fragment_row<T, DP>(dv_out + (tok0 + key) * v_stride + int64_t{gh} * dv, adv, hf, qd, dv, 1.0f);
  }
#else
  (void)dout; (void)q; (void)k; (void)v; (void)lse; (void)dvec; (void)dk; (void)dv_out; (void)batch; (void)seq; (void)heads;
  (void)kv_heads; (void)d; (void)dv; (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#if defined(__CUDA_ARCH__)
  __trap();  // only the sm_90a build has wgmma; the host never launches this elsewhere
#endif
#endif
}

template <typename T, int DP, int NWG>
__global__ void __launch_bounds__(128 * NWG, 1)
    attention_dq_wgmma_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                              const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dq, int batch, int seq,
                              int heads, int kv_heads, int d, int dv, int64_t q_stride, int64_t kv_stride, int64_t v_stride,
                              int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
#if defined(KILN_HAS_WGMMA)
  using L = WgBackwardLayout<DP, NWG>;
  using OwnTile = typename L::OwnTile;
  using LoopTile = typename L::LoopTile;
  constexpr int OWN = L::OWN, TILE = L::TILE, NT = L::NT;
  KILN_DYNAMIC_SHARED(unsigned char, smem_raw);
  T* qs = aligned_shared<T>(smem_raw);
  T* dos = qs + OwnTile::kElems;
  T* tiles = dos + OwnTile::kElems;  // buffer i: K at tiles + 2 i LoopTile::kElems, V after it

  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, qd = lane & 3;
  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, OWN);
  const int h = tile.head, b = tile.batch, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0, lrow = (int64_t{b} * heads + h) * seq;
  const int* docs = doc_row(doc_starts, tok0);
  const float s_mul = scale * kLog2e;
  const int wg_first = q0 + 64 * wg;                             // this warpgroup's first query
  const int t_lo = wg_first + 16 * warp + (lane >> 2), t_hi = t_lo + 8;  // this thread's two query rows
  const float ls_lo = t_lo < seq ? lse[lrow + t_lo] * kLog2e : 0.0f, ls_hi = t_hi < seq ? lse[lrow + t_hi] * kLog2e : 0.0f;
  const float dl_lo = t_lo < seq ? dvec[lrow + t_lo] : 0.0f, dl_hi = t_hi < seq ? dvec[lrow + t_hi] : 0.0f;
  const T* kb = k + tok0 * kv_stride + int64_t{tile.kv_head} * d;
  const T* vb = v + tok0 * v_stride + int64_t{tile.kv_head} * dv;

  const int kt0 = first_key_tile(docs, q0, seq, window, TILE), n_kt = (q0 + nq - 1) / TILE + 1;  // tiles before kt0: before every query's first key
  auto copy_keys = [&](int kt) { copy_key_tile<T, LoopTile, TILE, DP, NT>(tiles, kb, vb, kv_stride, v_stride, kt, seq, d, dv); };
  copy_sw128<T, OwnTile, OWN, DP, NT>(qs, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, nq, d);
  copy_sw128<T, OwnTile, OWN, DP, NT>(dos, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, nq, dv);
  copy_keys(kt0);
  ptx::cp_async_commit();

  // This warpgroup's 64 queries of Q and dO; K and V of buffer 0.
  const auto [desc_q, desc_do, desc_k0, desc_v0] = pass_descriptors<OwnTile, LoopTile>(qs, dos, tiles, wg);

  float adq[DP / 2];
#pragma unroll
  for (int i = 0; i < DP / 2; i++) adq[i] = 0.0f;

  for (int kt = kt0; kt < n_kt; kt++) {
    const int kv0 = kt * TILE;
    if (kt + 1 < n_kt) copy_keys(kt + 1);  // into the buffer read in iteration kt - 1 (freed by its closing barrier)
    commit_and_land_all_but_newest();
    // Uniform in the warpgroup: else every key is after every query or before every query's first key, or no query is real.
    if (kv0 <= wg_first + 63 && wg_first < seq && !before_first_key(docs, wg_first, kv0 + TILE - 1, seq, window)) {
      const uint64_t buf = (kt & 1) * ((2 * L::tile_bytes) >> 4);  // descriptor start units of this tile's buffer
      float s[TILE / 2], dp[TILE / 2];  // S = Q_g K^T, dP = dO_g V^T
      score_products<T, DP, OwnTile, LoopTile>(s, dp, desc_q, desc_k0 + buf, desc_do, desc_v0 + buf);

      // Register 4 j + 2 hf + e: query row hf ? t_hi : t_lo, key kv0 + 8 j + 2 qd + e.
#pragma unroll
      for (int i = 0; i < TILE / 2; i++) {
        const int hf = (i >> 1) & 1;
        p_and_ds(s[i], dp[i], s_mul, hf ? ls_hi : ls_lo, hf ? dl_hi : dl_lo);
      }
      // Pairs with the key after the query or before its first key, or either past the sequence: only in
      // tiles that reach them (the tile's first key before the warpgroup's last query's first key).
      if (kv0 + TILE - 1 > wg_first || kv0 + TILE > seq || wg_first + 64 > seq || before_first_key(docs, wg_first + 63, kv0, seq, window)) {
#pragma unroll
        for (int i = 0; i < TILE / 2; i++) {
          const int key = kv0 + 8 * (i >> 2) + 2 * qd + (i & 1), t = (i >> 1) & 1 ? t_hi : t_lo;
          if (!(key <= t && t < seq && key < seq) || before_first_key(docs, t, key, seq, window)) s[i] = dp[i] = 0.0f;
        }
      }

      // dQ_g += dS K
      uint32_t da[TILE / 16][4];
      accumulator_tile_as_a<T>(da, dp);
      register_a_products<T>(adq, da, desc_k0 + buf);
      release_operands(da);
      wgmma_commit_and_wait(adq);
    }
    __syncthreads();  // this buffer is free for tile kt + 2
  }
  ptx::cp_async_wait<0>();  // only empty groups are left

#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const int t = hf ? t_hi : t_lo;
    if (t < seq) store_fragment_row<T, DP>(dq + (tok0 + t) * q_stride + int64_t{h} * d, adq, hf, qd, d, scale);
  }
#else
  (void)dout; (void)q; (void)k; (void)v; (void)lse; (void)dvec; (void)dq; (void)batch; (void)seq; (void)heads; (void)kv_heads;
  (void)d; (void)dv; (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#if defined(__CUDA_ARCH__)
  __trap();  // only the sm_90a build has wgmma; the host never launches this elsewhere
#endif
#endif
}

template <typename T, int DP, int NWG, bool DOCS = false>
void launch_backward_wgmma(const KernelCall& c, const Args& a, const float* dvec) {
  using L = WgBackwardLayout<DP, NWG>;
  const unsigned kv_grid = ceil_div(a.seq, L::OWN) * static_cast<unsigned>(a.kv_heads * a.batch);
  auto dkdv = attention_dkdv_wgmma_kernel<T, DP, NWG, DOCS>;
  allow_shared(dkdv, L::total);
  launch("attentionBackward", dkdv, dim3(kv_grid), dim3(L::NT), L::total, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<const T>(3), c.ptr<const float>(5), dvec, c.ptr<T>(7), c.ptr<T>(8), a.batch, a.seq, a.heads,
         a.kv_heads, a.d, a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
  const unsigned q_grid = ceil_div(a.seq, L::OWN) * static_cast<unsigned>(a.heads * a.batch);
  auto dqk = attention_dq_wgmma_kernel<T, DP, NWG>;
  allow_shared(dqk, L::total);
  launch("attentionBackward", dqk, dim3(q_grid), dim3(L::NT), L::total, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<const T>(3), c.ptr<const float>(5), dvec, c.ptr<T>(6), a.batch, a.seq, a.heads, a.kv_heads, a.d,
         a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
}

/**
 * Head sizes up to 64 take KILN_ATTENTION_WGMMA_ROWS' block size; wider heads always
 * blocks of two warpgroups (one warpgroup's dK and dV accumulators for 128 columns would
 * leave its block's copies too few registers: a spill).
 */
template <typename T>
void launch_by_width(const KernelCall& c, const Args& a, const float* dvec) {
  const bool docs = a.doc_starts != nullptr;
  if (a.d_max() > 64) launch_backward_wgmma<T, 128, 2>(c, a, dvec);
  else if (wgmma_attention_warpgroups(c) == 2) docs ? launch_backward_wgmma<T, 64, 2, true>(c, a, dvec) : launch_backward_wgmma<T, 64, 2>(c, a, dvec);
  else docs ? launch_backward_wgmma<T, 64, 1, true>(c, a, dvec) : launch_backward_wgmma<T, 64, 1>(c, a, dvec);
}

}  // namespace

bool launch_attention_backward_wgmma(const KernelCall& c, const float* dvec) {
  if (!c.wgmma_attention) return false;
  const Args a = read_args(c, kBackwardOperands);
  if (!attention_tc_allowed(c, a.dtype, a.d_max())) return false;
  // dOut, q, k and v are copied.
  if (!allows_16_byte_copies(c, {0, 1, 2, 3}, {a.d, a.dv, a.q_stride, a.kv_stride, a.v_stride, a.out_stride})) return false;
  // docStarts above head size 64 take the mma.sync kernels: the dK/dV kernel at DP 128 uses 254 registers
  // without them, and every form of the document mask tried spilled there (ptxas, sm_90a).
  if (a.doc_starts && a.d_max() > 64) return false;
  if (a.dtype == kBF16) launch_by_width<__nv_bfloat16>(c, a, dvec);
  else launch_by_width<__half>(c, a, dvec);
  return true;
}

}  // namespace kiln
