// attention_forward_tc.cu: the causal attention forward on tensor cores through WMMA,
// for bf16 and f16 with headDim and vHeadDim up to 128 (the math is at the top of
// attention.cu; the f32 kernel there runs every other case and KILN_ATTENTION_PATH=simt).
// The mma.sync kernel (attention_forward_mma.cu) takes every call this one takes; this
// one runs with KILN_ATTENTION_PATH=wmma. A value
// head size apart from the query/key one (MLA) runs here too: tiles are DP wide for
// the wider of the two, Q and K zero past headDim, V (so O) zero past vHeadDim.
// VOWN (v has a layout of its own) is false when v has k's head size and row stride
// (every call without MLA): V is then addressed with K's offsets, which keeps the
// registers (and blocks per SM) of the kernel before vHeadDim existed.
//
// A block of 4 warps owns 64 query rows of one (head, batch); warp w owns rows
// 16w..16w+15. For each tile of 32 keys:
//   S_w = Q_w K^T           16 x 32, WMMA from 16-bit tiles, f32 accumulators -> shared
//   online softmax          lane pair (2r, 2r+1) owns row r: 16 columns each,
//                           row max / sum through one shuffle; P_w rounded to T
//   O_w = alpha O_w + P_w V O_w lives in shared memory as f32, rescaled by the
//                           owning lanes, then accumulated by WMMA through fragments
// Shared memory (16-bit rows padded by 8, f32 rows by 4: 16-byte aligned rows,
// skewed banks; every fragment pointer 32-byte aligned):
//   Q 64 x DP, K and V 32 x DP (T, zero padded past d and past the sequence),
//   S 64 x 32 (f32), P 64 x 32 (T), O 64 x DP (f32).
// Scores are scaled in f32 after the product (scale * log2 e, exponentials base 2).
// One writer per output element and a fixed order of every sum: deterministic.
#include "attention_tc.h"

namespace kiln {
namespace {

constexpr int kTcRows = 64, kTcKeys = 32;

template <int DP>
struct TcLayout {
  static constexpr int LQ = DP + 8, LS = kTcKeys + 4, LP = kTcKeys + 8, LO = DP + 4;
  static constexpr size_t q_bytes = size_t{kTcRows} * LQ * 2, kv_bytes = size_t{kTcKeys} * LQ * 2;
  static constexpr size_t s_bytes = size_t{kTcRows} * LS * 4, p_bytes = size_t{kTcRows} * LP * 2, o_bytes = size_t{kTcRows} * LO * 4;
  static constexpr size_t total = q_bytes + 2 * kv_bytes + s_bytes + p_bytes + o_bytes;
};

template <typename T, int DP, bool VOWN>
__global__ void __launch_bounds__(kTcWarps * 32, 1)
    attention_forward_tc_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                                float* __restrict__ lse, int batch, int seq, int heads, int kv_heads, int d, int dv,
                                int64_t q_stride, int64_t kv_stride, int64_t v_stride, int64_t out_stride, float scale, int window,
                                const int* __restrict__ doc_starts) {
#if defined(KILN_ATTENTION_TC)
  using namespace nvcuda;
  using L = TcLayout<DP>;
  KILN_DYNAMIC_SHARED(unsigned char, smem);
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = reinterpret_cast<T*>(smem + L::q_bytes);
  T* vs = reinterpret_cast<T*>(smem + L::q_bytes + L::kv_bytes);
  float* ss = reinterpret_cast<float*>(smem + L::q_bytes + 2 * L::kv_bytes);
  T* ps = reinterpret_cast<T*>(smem + L::q_bytes + 2 * L::kv_bytes + L::s_bytes);
  float* os = reinterpret_cast<float*>(smem + L::q_bytes + 2 * L::kv_bytes + L::s_bytes + L::p_bytes);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1;
  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, kTcRows);
  const int h = tile.head, b = tile.batch, g = tile.kv_head, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0;
  const int wrow = warp * 16;       // this warp's first row in the tile
  const int t = q0 + wrow + r;      // this lane pair's query row
  const float s_mul = scale * kLog2e;
  const int* docs = doc_row(doc_starts, tok0);
  const int ft = first_key(docs, t, seq, window);  // the row's first key

  load_tile_t<T, DP>(qs, L::LQ, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, kTcRows, nq, d);
  for (int i = threadIdx.x; i < kTcRows * DP; i += kTcWarps * 32) os[(i / DP) * L::LO + i % DP] = 0.0f;
  const int dvo = VOWN ? dv : d;                              // v and out columns
  const int64_t vstride = VOWN ? v_stride : kv_stride;
  const T* kb = k + tok0 * kv_stride + int64_t{g} * d;
  const T* vb = v + tok0 * vstride + int64_t{g} * dvo;

  // m starts at the lowest finite float, not -inf: a row whose keys so far all lie before its first key
  // (mx = -inf) then takes p = 2^-inf = 0 and alpha = 1, never NaN; later tiles' finite scores pass it.
  float m = -3.402823466e38f, l = 0.0f;
  const int n_kt = (q0 + nq - 1) / kTcKeys + 1;
  for (int kt = first_key_tile(docs, q0, seq, window, kTcKeys); kt < n_kt; kt++) {
    const int kv0 = kt * kTcKeys, nk = min(kTcKeys, seq - kv0);
    __syncthreads();  // the previous tile's K and V are no longer read (and Q, O are in place)
    load_tile_t<T, DP>(ks, L::LQ, kb + int64_t{kv0} * kv_stride, kv_stride, kTcKeys, nk, d);
    load_tile_t<T, DP>(vs, L::LQ, vb + int64_t{kv0} * vstride, vstride, kTcKeys, nk, dvo);
    __syncthreads();
    // Every key of the tile is after every row of this warp. (A warp whose rows' first keys all lie past
    // the tile masks it whole: skipping it too cost the f16 kernel 23 registers on sm_80, for edge tiles.)
    if (kv0 > q0 + wrow + 15) continue;

    // S_w = Q_w K^T
    warp_product_nt<T, DP, kTcKeys>(ss + wrow * L::LS, L::LS, qs + wrow * L::LQ, L::LQ, ks, L::LQ);
    __syncwarp();

    // Online softmax over this lane's 16 columns of row r.
    const float* srow = ss + (wrow + r) * L::LS + half * 16;
    float sv[16], mx = neg_inf();
#pragma unroll
    for (int c = 0; c < 16; c++) {
      const int u = kv0 + half * 16 + c;
      sv[c] = (u > t || u >= seq || u < ft) ? neg_inf() : srow[c] * s_mul;
      mx = fmaxf(mx, sv[c]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m, mx), alpha = exp2f(m - m_new);
    float rs = 0.0f;
    T* prow = ps + (wrow + r) * L::LP + half * 16;
#pragma unroll
    for (int c = 0; c < 16; c++) {
      const float p = exp2f(sv[c] - m_new);
      rs += p;
      prow[c] = from_f32<T>(p);
    }
    rs += __shfl_xor_sync(0xffffffffu, rs, 1);
    l = l * alpha + rs;
    m = m_new;
    float* orow = os + (wrow + r) * L::LO + half * (DP / 2);
    for (int c = 0; c < DP / 2; c++) orow[c] *= alpha;
    __syncwarp();

    // O_w += P_w V, through fragments loaded from and stored back to shared memory
    TcAccumulator acc[DP / 16];
#pragma unroll
    for (int j = 0; j < DP / 16; j++) wmma::load_matrix_sync(acc[j], os + wrow * L::LO + j * 16, L::LO, wmma::mem_row_major);
    warp_product_nn<T, kTcKeys, DP / 16>(acc, ps + wrow * L::LP, L::LP, vs, L::LQ);
#pragma unroll
    for (int j = 0; j < DP / 16; j++) wmma::store_matrix_sync(os + wrow * L::LO + j * 16, acc[j], L::LO, wmma::mem_row_major);
    __syncwarp();
  }

  if (t < seq) {
    const float* orow = os + (wrow + r) * L::LO;
    T* dst = out + (tok0 + t) * out_stride + int64_t{h} * dvo;
    const float inv = 1.0f / l;
    for (int c = half; c < dvo; c += 2) dst[c] = from_f32<T>(orow[c] * inv);
    if (half == 0) lse[(int64_t{b} * heads + h) * seq + t] = (m + log2f(l)) * kLn2;
  }
#else
  (void)q; (void)k; (void)v; (void)out; (void)lse; (void)batch; (void)seq; (void)heads; (void)kv_heads; (void)d; (void)dv;
  (void)q_stride; (void)kv_stride; (void)v_stride; (void)out_stride; (void)scale; (void)window; (void)doc_starts;
#endif
}

template <typename T, int DP>
void launch_tc(const KernelCall& c, const Args& a) {
  const bool v_own = a.dv != a.d || a.v_stride != a.kv_stride;
  auto kernel = v_own ? attention_forward_tc_kernel<T, DP, true> : attention_forward_tc_kernel<T, DP, false>;
  allow_shared(kernel, TcLayout<DP>::total);
  const unsigned grid = ceil_div(a.seq, kTcRows) * static_cast<unsigned>(a.heads * a.batch);
  launch("attentionForward", kernel, dim3(grid), dim3(kTcWarps * 32), TcLayout<DP>::total, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
         c.ptr<const T>(2), c.ptr<T>(3), c.ptr<float>(4), a.batch, a.seq, a.heads, a.kv_heads, a.d, a.dv, a.q_stride, a.kv_stride,
         a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
}

}  // namespace

bool launch_attention_forward_tensor_cores(const KernelCall& c) {
  if (launch_attention_forward_wgmma(c) || launch_attention_forward_mma(c)) return true;
  const Args a = read_args(c, kForwardOperands);
  if (!attention_tc_allowed(c, a.dtype, a.d_max())) return false;
  if (a.dtype == kBF16) {
    if (a.d_max() <= 64) launch_tc<__nv_bfloat16, 64>(c, a);
    else launch_tc<__nv_bfloat16, 128>(c, a);
  } else {
    if (a.d_max() <= 64) launch_tc<__half, 64>(c, a);
    else launch_tc<__half, 128>(c, a);
  }
  return true;
}

}  // namespace kiln
