// attention_forward_wgmma.cu: the causal attention forward for bf16 and f16 on Hopper's
// warpgroup instruction (wgmma.mma_async, sm_90a; the simulator emulates it), with
// KILN_ATTENTION_PATH=wgmma on an sm_90 device (opt-in until a GPU has measured it):
// FlashAttention-2's forward (math at the top of attention.cu) with each product one
// warpgroup's wgmma instead of four warps' mma.sync, so a K or V tile is read from
// shared memory once per 64 query rows instead of once per 16 or 32. It takes what the
// mma.sync kernel takes when every row and head offset allows 16-byte copies: headDim
// and vHeadDim up to 128 and multiples of 8, tiles DP = 64 or 128 wide (the wider head
// size), Q and K zero past headDim, V (so O) zero past vHeadDim.
//
// A block of NWG warpgroups (attention_wgmma.h: 1 by default, 2 with
// KILN_ATTENTION_WGMMA_ROWS=128) owns 64 NWG query rows of one (head, batch); warpgroup g
// owns rows 64 g .. 64 g + 63 (warp w of it rows 16 w .. 16 w + 15, as wgmma's fragments
// have it).
// For each key tile of KEYS keys (128 for DP 64, 64 for DP 128):
//   S_g = Q_g K^T       DP / 16 wgmma m64nKEYSk16, both operands in shared memory
//   online softmax      thread (w, lane) holds rows 16 w + lane / 4 (+ 8) and columns
//                       8 j + 2 (lane % 4) (+ 1) of S: the mma.sync accumulator layout,
//                       so row max and sum go over the 4 lanes of a quad by shuffles
//   O_g = alpha O_g + P_g V
//                       KEYS / 16 wgmma m64nDPk16 with A = P from registers (two
//                       neighbouring 8-column accumulator groups rounded to T are
//                       the A fragment of a 16-deep step), B = V in shared memory
// Shared memory (1024-byte aligned: wgmma's 128-byte swizzle atoms): Q (64 NWG x DP) then
// two buffers of K and V (KEYS x DP each), tiles and descriptor steps as attention_wgmma.h
// has them: Q (A) and K (B) K-major, V (B) MN-major.
// Key tile kt + 1 is copied (cp.async, zero fill past the sequence and the head sizes)
// while tile kt is used; the barrier at the end of an iteration frees tile kt's buffer.
// Tiles wholly after a warpgroup's last row or before its first row's first key (window or
// document: attention_tiles.h's first_key) are skipped by it (tiles before the block's
// first row's first key by the block); tiles reaching past its first row or the
// sequence, or before its last row's first key, are masked. Scores
// are scaled in f32 after the product (scale * log2 e, exponentials base 2). One writer
// per output element, every sum in a fixed order: deterministic, and the same for any
// block order.
#include "attention_wgmma.h"

namespace kiln {
namespace {

template <int DP, int NWG>
struct WgmmaLayout {
  static constexpr int NT = 128 * NWG;              // threads of a block
  static constexpr int ROWS = 64 * NWG;             // query rows of a block
  static constexpr int KEYS = DP <= 64 ? 128 : 64;  // keys of a loop tile
  using QTile = Sw128Tile<ROWS, DP / 8>;
  using KvTile = Sw128Tile<KEYS, DP / 8>;
  static constexpr size_t q_bytes = size_t{QTile::kElems} * 2, kv_bytes = size_t{KvTile::kElems} * 2;
  static_assert(q_bytes % 1024 == 0 && kv_bytes % 1024 == 0, "every tile starts on a 1024-byte swizzle atom");
  static constexpr size_t total = q_bytes + 4 * kv_bytes + 1024;  // + the alignment of the first atom
};

template <typename T, int DP, int NWG>
__global__ void __launch_bounds__(128 * NWG, 1)
    attention_forward_wgmma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                                   float* __restrict__ lse, int batch, int seq, int heads, int kv_heads, int d, int dv, int64_t q_stride,
                                   int64_t kv_stride, int64_t v_stride, int64_t out_stride, float scale, int window,
                                   const int* __restrict__ doc_starts) {
#if defined(KILN_HAS_WGMMA)
  using L = WgmmaLayout<DP, NWG>;
  using QTile = typename L::QTile;
  using KvTile = typename L::KvTile;
  constexpr int KEYS = L::KEYS, ROWS = L::ROWS, NT = L::NT;
  KILN_DYNAMIC_SHARED(unsigned char, smem_raw);
  T* qs = aligned_shared<T>(smem_raw);
  T* kvs = qs + QTile::kElems;  // buffer i: K at kvs + 2 i KvTile::kElems, V after it

  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane >> 2, qd = lane & 3;
  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, ROWS);
  const int h = tile.head, b = tile.batch, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0;
  const int* docs = doc_row(doc_starts, tok0);
  const int wg_first = q0 + 64 * wg, wg_last = wg_first + 63;  // this warpgroup's rows
  const int row_lo = wg_first + 16 * warp + g, row_hi = row_lo + 8;  // this thread's two rows
  const float s_mul = scale * kLog2e;
  const T* kb = k + tok0 * kv_stride + int64_t{tile.kv_head} * d;
  const T* vb = v + tok0 * v_stride + int64_t{tile.kv_head} * dv;

  const int kt0 = first_key_tile(docs, q0, seq, window, KEYS), n_kt = (q0 + nq - 1) / KEYS + 1;  // tiles before kt0: before every row's first key
  auto copy_keys = [&](int kt) { copy_key_tile<T, KvTile, KEYS, DP, NT>(kvs, kb, vb, kv_stride, v_stride, kt, seq, d, dv); };
  copy_sw128<T, QTile, ROWS, DP, NT>(qs, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, nq, d);
  copy_keys(kt0);
  ptx::cp_async_commit();

  // Descriptors: this warpgroup's 64 rows of Q; K and V of buffer 0 (buffer 1 is 2 KvTile::kElems further).
  const uint64_t desc_q = tile_descriptor<QTile>(qs + wg * 64 * 64);
  const uint64_t desc_k0 = tile_descriptor<KvTile>(kvs);
  const uint64_t desc_v0 = tile_descriptor<KvTile>(kvs + KvTile::kElems);
  constexpr uint64_t kBufferStep = (2 * L::kv_bytes) >> 4;  // descriptor start units (16 bytes)

  float o[DP / 2];
#pragma unroll
  for (int i = 0; i < DP / 2; i++) o[i] = 0.0f;
  // Per half (rows row_lo, row_hi): the reference max (base-2 scaled scores) and this lane's share of the sum.
  float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.0f, 0.0f};

  for (int kt = kt0; kt < n_kt; kt++) {
    const int kv0 = kt * KEYS;
    if (kt + 1 < n_kt) copy_keys(kt + 1);  // into the buffer read in iteration kt - 1 (freed by its closing barrier)
    commit_and_land_all_but_newest();  // tile kt (and Q), everyone's; tile kt + 1 may be in flight
    // Uniform in the warpgroup: else every key is after every row or before every row's first key, or no row is real.
    if (kv0 <= wg_last && wg_first < seq && !before_first_key(docs, wg_first, kv0 + KEYS - 1, seq, window)) {
      const uint64_t buf = (kt & 1) * kBufferStep;
      // S_g = Q_g K^T
      float s[KEYS / 2];
      zero_for_wgmma(s);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < DP / 16; kk++)
        ptx::wgmma_m64k16<T, KEYS, false, false>(s, desc_q + k_major_step<QTile>(kk), desc_k0 + buf + k_major_step<KvTile>(kk));
      wgmma_commit_and_wait(s);

      // Online softmax (attention_mma.h): masked tiles reach keys after a row, past the sequence or before a row's first key.
      const bool masked = kv0 + KEYS - 1 > wg_first || kv0 + KEYS > seq || before_first_key(docs, wg_last, kv0, seq, window);
      online_softmax_tile(s, o, m, l, kv0, row_lo, qd, seq, window, docs, masked, s_mul);

      // O_g += P_g V
      uint32_t p[KEYS / 16][4];
      accumulator_tile_as_a<T>(p, s);
      register_a_products<T>(o, p, desc_v0 + buf);
      release_operands(p);
      wgmma_commit_and_wait(o);
    }
    __syncthreads();  // tile kt's buffer is free for tile kt + 2
  }
  ptx::cp_async_wait<0>();  // only empty groups are left

  // Register 4 j + 2 hf + e: column 8 j + 2 qd + e of row hf ? row_hi : row_lo.
  row_sums(l);
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const int t = hf ? row_hi : row_lo;
    if (t >= seq) continue;
    const float inv = 1.0f / l[hf];
    T* dst = out + (tok0 + t) * out_stride + int64_t{h} * dv;
#pragma unroll
    for (int j = 0; j < DP / 8; j++) {
      const int c = 8 * j + 2 * qd;
      if (c < dv) dst[c] = from_f32<T>(o[4 * j + 2 * hf] * inv);
      if (c + 1 < dv) dst[c + 1] = from_f32<T>(o[4 * j + 2 * hf + 1] * inv);
    }
    if (qd == 0) lse[(int64_t{b} * heads + h) * seq + t] = (m[hf] + log2f(l[hf])) * kLn2;
  }
#else
  (void)q; (void)k; (void)v; (void)out; (void)lse; (void)batch; (void)seq; (void)heads; (void)kv_heads; (void)d; (void)dv;
  (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#if defined(__CUDA_ARCH__)
  __trap();  // only the sm_90a build has wgmma; the host never launches this elsewhere
#endif
#endif
}

template <typename T, int DP, int NWG>
void launch_wgmma(const KernelCall& c, const Args& a) {
  using L = WgmmaLayout<DP, NWG>;
  auto kernel = attention_forward_wgmma_kernel<T, DP, NWG>;
  allow_shared(kernel, L::total);
  const unsigned grid = ceil_div(a.seq, L::ROWS) * static_cast<unsigned>(a.heads * a.batch);
  launch("attentionForward", kernel, dim3(grid), dim3(L::NT), L::total, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<T>(3), c.ptr<float>(4), a.batch, a.seq, a.heads, a.kv_heads, a.d, a.dv, a.q_stride, a.kv_stride,
         a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
}

template <int NWG>
void launch_by_type(const KernelCall& c, const Args& a) {
  if (a.dtype == kBF16) {
    if (a.d_max() <= 64) launch_wgmma<__nv_bfloat16, 64, NWG>(c, a);
    else launch_wgmma<__nv_bfloat16, 128, NWG>(c, a);
  } else {
    if (a.d_max() <= 64) launch_wgmma<__half, 64, NWG>(c, a);
    else launch_wgmma<__half, 128, NWG>(c, a);
  }
}

}  // namespace

bool launch_attention_forward_wgmma(const KernelCall& c) {
  if (!c.wgmma_attention) return false;
  const Args a = read_args(c, kForwardOperands);
  if (!attention_tc_allowed(c, a.dtype, a.d_max())) return false;
  if (!allows_16_byte_copies(c, {0, 1, 2}, {a.d, a.dv, a.q_stride, a.kv_stride, a.v_stride})) return false;  // q, k, v
  if (wgmma_attention_warpgroups(c) == 2) launch_by_type<2>(c, a);
  else launch_by_type<1>(c, a);
  return true;
}

}  // namespace kiln
