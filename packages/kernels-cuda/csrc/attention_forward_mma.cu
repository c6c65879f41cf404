// attention_forward_mma.cu: the causal attention forward for bf16 and f16 on
// mma.sync.m16n8k16 with scores, probabilities and the output kept in registers
// (FlashAttention-2's forward; the math is at the top of attention.cu). It takes
// what attention_forward_tc.cu (the WMMA kernel, KILN_ATTENTION_PATH=wmma) takes:
// headDim and vHeadDim up to 128, tiles DP wide for the wider of the two, Q and K
// zero past headDim, V (so O) zero past vHeadDim.
//
// A block of 4 warps owns 64 MI query rows of one (head, batch); warp w owns rows
// 16 MI w .. 16 MI (w + 1) - 1 as MI tiles of 16 rows (MI = 2 for tiles up to DP 64:
// every K and V fragment read from shared memory feeds two mma, so fewer reads per
// product; MI = 1 for DP 128, where two tiles' registers would not fit). With MI = 1,
// Q's fragments are loaded once (ldmatrix from shared memory) and stay in registers;
// with MI = 2 they are read again per key tile (the registers go to the second tile's
// scores and output), and the key tiles are 32 keys (64 with KILN_ATTENTION_MMA_KEYS=64:
// half the tiles, so half the per-tile softmax rescales, shuffles and barriers, for
// about 45 more registers and twice the K/V shared memory; 64 with MI = 1). For each key
// tile, for each of the warp's row tiles:
//   S_w = Q_w K^T     KEYS / 8 accumulator tiles of 16 x 8 (f32), K's fragments by ldmatrix
//   online softmax    lane (g, q) holds rows g and g + 8, columns 2q, 2q + 1 of every
//                     tile: the row max over the 4 lanes of a row through shuffles (the
//                     sums stay per lane until the end); the reference max, l and O
//                     move only when a row's max passes it by 2^8 (attention_mma.h)
//   O_w = alpha O_w + P_w V
//                     P is rounded to T straight from S's accumulators: two adjacent
//                     16 x 8 accumulator tiles are one 16 x 16 A fragment (same rows,
//                     same column pairs); V's fragments by ldmatrix .trans
// Shared memory: Q 64 MI x DP, and two buffers of K and V KEYS x DP (T, rows padded by 8
// elements: 16-byte aligned rows, and the 8 rows one ldmatrix reads fall in distinct
// banks). Key tile kt + 1 is copied into the other buffer while tile kt is used: by
// cp.async (16-byte pieces, zero fill past the sequence and the head size) when every
// row and head offset allows 16-byte copies (VEC), else by plain loads before tile kt.
// Tiles wholly after a warp's last row, or before its first row's first key (the window's,
// or its document's start: attention_tiles.h's first_key), are skipped by that warp (and
// tiles before the block's first row's first key by the block); tiles that reach past its
// first row, past the sequence or before its last row's first key are masked. Scores are scaled in f32 after the product (scale * log2 e,
// exponentials base 2).
// One writer per output element and a fixed order of every sum: deterministic.
#include "attention_mma.h"

namespace kiln {
namespace {

/**
 * The tiles: MI 16-row tiles per warp, two for heads up to 64 wide (each K and V fragment
 * serves both) with key tiles of 32 (the registers of two tiles' scores and outputs) or,
 * WIDE, 64; one with key tiles of 64 for heads up to 128.
 */
template <int DP, bool WIDE = false>
struct MmaLayout {
  static constexpr int MI = DP <= 64 ? 2 : 1;
  static constexpr int KEYS = MI == 2 && !WIDE ? 32 : 64;  // keys of a loop tile
  static constexpr int ROWS = kMmaWarps * 16 * MI;  // query rows of a block
  static constexpr int LD = DP + 8;                 // elements per shared row
  static constexpr size_t q_bytes = size_t{ROWS} * LD * 2, kv_bytes = size_t{KEYS} * LD * 2;
  static constexpr size_t total = q_bytes + 4 * kv_bytes;  // Q, then K and V per buffer
};

template <typename T, int DP, bool WIDE, bool VOWN, bool VEC>
__global__ void __launch_bounds__(kMmaWarps * 32, 1)
    attention_forward_mma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                                 float* __restrict__ lse, int batch, int seq, int heads, int kv_heads, int d, int dv,
                                 int64_t q_stride, int64_t kv_stride, int64_t v_stride, int64_t out_stride, float scale, int window,
                                 const int* __restrict__ doc_starts) {
#if defined(KILN_ATTENTION_TC)
  using L = MmaLayout<DP, WIDE>;
  constexpr int MI = L::MI, KEYS = L::KEYS;
  constexpr int NS = KEYS / 8;       // 16 x 8 score tiles per key tile
  constexpr int NO = DP / 8;         // 16 x 8 output tiles
  KILN_DYNAMIC_SHARED(unsigned char, smem);
  T* qs = reinterpret_cast<T*>(smem);
  T* kvs = reinterpret_cast<T*>(smem + L::q_bytes);  // buffer i: K at kvs + 2 i TILE, V at kvs + (2 i + 1) TILE
  constexpr int TILE = KEYS * L::LD;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, L::ROWS);
  const int h = tile.head, b = tile.batch, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0;
  const int* docs = doc_row(doc_starts, tok0);
  const int wrow = warp * 16 * MI;  // this warp's first row in the tile; row tile i starts 16 i further
  const float s_mul = scale * kLog2e;
  const int dvo = VOWN ? dv : d;  // v and out columns
  const int64_t vstride = VOWN ? v_stride : kv_stride;
  const T* kb = k + tok0 * kv_stride + int64_t{tile.kv_head} * d;
  const T* vb = v + tok0 * vstride + int64_t{tile.kv_head} * dvo;

  const int kt0 = first_key_tile(docs, q0, seq, window, KEYS), n_kt = (q0 + nq - 1) / KEYS + 1;  // tiles before kt0: before every row's first key
  auto copy_keys = [&](int kt) {
    const int kv0 = kt * KEYS, nk = min(KEYS, seq - kv0);
    T* buf = kvs + (kt & 1) * 2 * TILE;
    copy_tile<T, DP, VEC>(buf, kb + int64_t{kv0} * kv_stride, kv_stride, KEYS, nk, d);
    copy_tile<T, DP, VEC>(buf + TILE, vb + int64_t{kv0} * vstride, vstride, KEYS, nk, dvo);
  };
  copy_tile<T, DP, VEC>(qs, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, L::ROWS, nq, d);
  copy_keys(kt0);
  tile_copies_visible<VEC, 0>();
  // One row tile: Q_w's A fragments stay in registers for the whole loop; two: they are
  // read from shared memory per key tile (the registers hold the second tile's S and O).
  uint32_t qf[1][DP / 16][4];
  if constexpr (MI == 1) load_a_fragments<DP>(qf[0], qs + wrow * L::LD, lane);

  float o[MI][NO][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NO; j++) o[i][j][0] = o[i][j][1] = o[i][j][2] = o[i][j][3] = 0.0f;
  // Per row tile i and half (rows g, g + 8): the reference max (base-2 scaled scores) and this lane's share of the sum.
  float m[MI][2], l[MI][2];
#pragma unroll
  for (int i = 0; i < MI; i++) m[i][0] = m[i][1] = neg_inf(), l[i][0] = l[i][1] = 0.0f;

  for (int kt = kt0; kt < n_kt; kt++) {
    const int kv0 = kt * KEYS;
    // Tile kt + 1 into the other buffer (last read in iteration kt - 1, before its closing barrier).
    if (kt + 1 < n_kt) copy_keys(kt + 1);
    tile_copies_visible<VEC, 1>();  // tile kt, not tile kt + 1 (plain loads of tile kt: the previous closing barrier)
    const T* ks = kvs + (kt & 1) * 2 * TILE;
    const T* vs = ks + TILE;
    // Else every key of the tile is after every row of this warp, or before every row's first key.
    if (kv0 <= q0 + wrow + 16 * MI - 1 && !before_first_key(docs, q0 + wrow, kv0 + KEYS - 1, seq, window)) {
      // S_w = Q_w K^T
      float s[MI][NS][4];
      if constexpr (MI == 1) warp_mma_nt<T, DP, NS, 1>(s, qf, ks, lane);
      else warp_mma_nt<T, DP, NS, MI>(s, qs + wrow * L::LD, ks, lane);

      // Online softmax per row tile (attention_mma.h): masked tiles reach keys after a row, past the
      // sequence, or before the first key of a row (of the last row r0 + 15 first).
#pragma unroll
      for (int i = 0; i < MI; i++) {
        const int r0 = q0 + wrow + 16 * i;  // the row tile's first row
        const bool masked = kv0 + KEYS - 1 > r0 || kv0 + KEYS > seq || before_first_key(docs, r0 + 15, kv0, seq, window);
        online_softmax_tile(flat(s[i]), flat(o[i]), m[i], l[i], kv0, r0 + g, qd, seq, window, docs, masked, s_mul);
      }

      // O_w += P_w V
      warp_mma_nn<T, DP, NS, MI>(o, s, vs, lane);
    }
    __syncthreads();  // tile kt's buffer is free for tile kt + 2
  }

  // Lane (g, q) writes columns 8 j + 2 q and 8 j + 2 q + 1 of rows g and g + 8 of each row tile.
#pragma unroll
  for (int i = 0; i < MI; i++) row_sums(l[i]);
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int t = q0 + wrow + 16 * i + g + 8 * half;
      if (t >= seq) continue;
      const float inv = 1.0f / l[i][half];
      store_accumulator_row<T, DP>(out + (tok0 + t) * out_stride + int64_t{h} * dvo, o[i], half, qd, dvo, inv);
      if (qd == 0) lse[(int64_t{b} * heads + h) * seq + t] = (m[i][half] + log2f(l[i][half])) * kLn2;
    }
#else
  (void)q; (void)k; (void)v; (void)out; (void)lse; (void)batch; (void)seq; (void)heads; (void)kv_heads; (void)d; (void)dv;
  (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#endif
}

template <typename T, int DP, bool WIDE, bool VOWN>
auto pick_kernel(bool vec) {
  return vec ? attention_forward_mma_kernel<T, DP, WIDE, VOWN, true> : attention_forward_mma_kernel<T, DP, WIDE, VOWN, false>;
}

template <typename T, int DP, bool WIDE = false>
void launch_mma(const KernelCall& c, const Args& a) {
  using L = MmaLayout<DP, WIDE>;
  const bool v_own = a.dv != a.d || a.v_stride != a.kv_stride, vec = allows_16_byte_copies(c, {0, 1, 2}, {a.d, a.dv, a.q_stride, a.kv_stride, a.v_stride});  // q, k, v
  auto kernel = v_own ? pick_kernel<T, DP, WIDE, true>(vec) : pick_kernel<T, DP, WIDE, false>(vec);
  allow_shared(kernel, L::total);
  const unsigned grid = ceil_div(a.seq, L::ROWS) * static_cast<unsigned>(a.heads * a.batch);
  launch("attentionForward", kernel, dim3(grid), dim3(kMmaWarps * 32), L::total, c.stream, c.ptr<const T>(0),
         c.ptr<const T>(1), c.ptr<const T>(2), c.ptr<T>(3), c.ptr<float>(4), a.batch, a.seq, a.heads, a.kv_heads, a.d, a.dv,
         a.q_stride, a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
}

}  // namespace

int default_mma_attention_keys(size_t shared_memory_per_sm) {
  constexpr size_t kReservedPerBlock = 1024;  // the shared memory the runtime keeps a block
  return 2 * (MmaLayout<64, true>::total + kReservedPerBlock) <= shared_memory_per_sm ? 64 : 32;
}

bool launch_attention_forward_mma(const KernelCall& c) {
  const Args a = read_args(c, kForwardOperands);
  if (c.wmma_attention || !attention_tc_allowed(c, a.dtype, a.d_max())) return false;
  const bool wide = c.mma_attention_keys == 64;
  if (a.dtype == kBF16) {
    if (a.d_max() > 64) launch_mma<__nv_bfloat16, 128>(c, a);
    else if (wide) launch_mma<__nv_bfloat16, 64, true>(c, a);
    else launch_mma<__nv_bfloat16, 64>(c, a);
  } else {
    if (a.d_max() > 64) launch_mma<__half, 128>(c, a);
    else if (wide) launch_mma<__half, 64, true>(c, a);
    else launch_mma<__half, 64>(c, a);
  }
  return true;
}

}  // namespace kiln
