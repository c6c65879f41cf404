// attention_mma.h: what the mma.sync attention kernels share (attention_forward_mma.cu,
// attention_backward_mma.cu): tile copies into shared memory, and the two warp
// products on m16n8k16 fragments with f32 accumulators in registers.
//
// Fragment layouts (PTX ISA; g = lane / 4, q = lane % 4): an accumulator tile 16 x 8
// holds (g, 2q), (g, 2q + 1) in c[0], c[1] and (g + 8, 2q), (g + 8, 2q + 1) in c[2], c[3].
// Two adjacent accumulator tiles (columns 16 kc .. 16 kc + 15) rounded to T are the A
// fragment of a 16 x 16 product step (same rows, same column pairs): that is how
// probabilities and dS go from one product into the next without shared memory.
// Shared tiles are rows of DP + 8 elements of T: 16-byte aligned rows, and the 8 rows
// one ldmatrix reads fall in distinct banks.
#pragma once
#include <cstring>
#include <initializer_list>

#include "attention_tc.h"
#include "mma_ptx.h"

namespace kiln {
namespace {

constexpr int kMmaWarps = 4;

/**
 * Whether a kernel may copy its tiles by cp.async: the operands at indices `operands`
 * start 16-byte aligned and every head size and row stride in `counts` is a whole
 * number of 16-byte pieces (8 elements), so every row and head offset is aligned too.
 */
inline bool allows_16_byte_copies(const KernelCall& c, std::initializer_list<int> operands, std::initializer_list<int64_t> counts) {
  for (const int i : operands)
    if (static_cast<uint64_t>(c.at(i)) & 15u) return false;
  for (const int64_t n : counts)
    if (n % 8 != 0) return false;
  return true;
}

/**
 * One score of a backward tile, in place: s becomes p = 2^(s s_mul - lse_log2), dp becomes
 * dS = p (dP - D). Masked pairs are zeroed afterwards, and only in the tiles that reach
 * them, so that tiles with every pair live pay nothing for the mask.
 */
__device__ __forceinline__ void p_and_ds(float& s, float& dp, float s_mul, float lse_log2, float d) {
  const float p = exp2_ftz(fmaf(s, s_mul, -lse_log2));
  s = p;
  dp = p * (dp - d);
}

/** Two floats rounded to T, packed as one register: `lo` in the low half (the lower column). */
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const T a = from_f32<T>(lo), b = from_f32<T>(hi);
  uint16_t ua, ub;
  memcpy(&ua, &a, 2);
  memcpy(&ub, &b, 2);
  return static_cast<uint32_t>(ua) | (static_cast<uint32_t>(ub) << 16);
}

/**
 * rows x DP tile from `src` (rows `stride` apart) into `dst` (rows DP + 8 apart): rows
 * past `valid` and columns past `d` are zero. VEC: by cp.async, d a multiple of 8 and
 * every row 16-byte aligned (the caller commits and waits); otherwise element by element.
 */
template <typename T, int DP, bool VEC>
__device__ __forceinline__ void copy_tile(T* dst, const T* src, int64_t stride, int rows, int valid, int d) {
  if constexpr (VEC) {
    constexpr int CHUNKS = DP / 8;
    for (int i = threadIdx.x; i < rows * CHUNKS; i += kMmaWarps * 32) {
      const int r = i / CHUNKS, c = (i % CHUNKS) * 8;
      const bool inside = r < valid && c < d;
      ptx::cp_async_16(dst + r * (DP + 8) + c, inside ? src + r * stride + c : src, inside ? 16u : 0u);
    }
  } else {
    load_tile_t<T, DP>(dst, DP + 8, src, stride, rows, valid, d);
  }
}

/**
 * Makes the tile copies issued since the last call visible to the whole block, all but
 * the newest IN_FLIGHT groups of them: VEC commits its cp.async group, waits and meets
 * at a barrier; plain loads need the barrier only when nothing may stay in flight (a
 * loop's plain loads of the next tile are made visible by the barrier that closes the
 * iteration).
 */
template <bool VEC, int IN_FLIGHT>
__device__ __forceinline__ void tile_copies_visible() {
  if constexpr (VEC) {
    ptx::cp_async_commit();
    ptx::cp_async_wait<IN_FLIGHT>();
    __syncthreads();
  } else if constexpr (IN_FLIGHT == 0) {
    __syncthreads();
  }
}

/** The 16 x DP A fragments of a warp's 16 rows of a shared tile (rows DP + 8 apart), by ldmatrix. */
template <int DP>
__device__ __forceinline__ void load_a_fragments(uint32_t (&f)[DP / 16][4], const void* rows16, int lane) {
  const auto* base = static_cast<const uint16_t*>(rows16);
  // lane i gives row i % 16, columns 8 (i / 16) onwards of each k16 step
#pragma unroll
  for (int kk = 0; kk < DP / 16; kk++) ptx::ldmatrix_x4(f[kk], base + (lane & 15) * (DP + 8) + kk * 16 + (lane >> 4) * 8);
}

/**
 * acc[i][j], acc[i][j + 1] (j even) += A_i's k16 step kk (one fragment per 16-row tile i)
 * times rows 8 j .. 8 j + 15 of B^T: each B fragment loaded once serves the MI row tiles.
 */
template <typename T, int DP, int N, int MI>
__device__ __forceinline__ void nt_step(float (&acc)[MI][N][4], const uint32_t (&af)[MI][4], const T* lane_b, int kk) {
#pragma unroll
  for (int j = 0; j < N; j += 2) {
    uint32_t r[4];
    ptx::ldmatrix_x4(r, lane_b + j * 8 * (DP + 8) + kk * 16);
    const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
    for (int i = 0; i < MI; i++) {
      ptx::mma_m16n8k16<T>(acc[i][j], af[i], b0);
      ptx::mma_m16n8k16<T>(acc[i][j + 1], af[i], b1);
    }
  }
}

/** One 16-row tile's arrays seen as MI = 1 of the row-tile forms (same layout). */
template <typename X, int A, int B>
__device__ __forceinline__ X (&one_tile(X (&x)[A][B]))[1][A][B] {
  return reinterpret_cast<X(&)[1][A][B]>(x);
}
template <typename X, int A, int B>
__device__ __forceinline__ const X (&one_tile(const X (&x)[A][B]))[1][A][B] {
  return reinterpret_cast<const X(&)[1][A][B]>(x);
}

/** This lane's ldmatrix row in B for nt_step: row 8 (i / 16) + i % 8 of a tile pair, columns 8 ((i / 8) % 2) of a k16 step. */
template <int DP>
__device__ __forceinline__ int nt_lane_offset(int lane) {
  return ((lane >> 4) * 8 + (lane & 7)) * (DP + 8) + ((lane >> 3) & 1) * 8;
}

/**
 * acc_i (16 x 8 N) = A_i (16 x DP) B^T for the warp's MI row tiles i, B the first 8 N rows
 * of a shared tile (rows DP + 8 apart): S = Q K^T, dP = dO V^T and their transposes.
 * load_a(kk, af) puts the k16 step kk's A fragment of each row tile in af[i].
 */
template <typename T, int DP, int N, int MI, typename LoadA>
__device__ __forceinline__ void warp_mma_nt_by_steps(float (&acc)[MI][N][4], const T* b, int lane, LoadA&& load_a) {
  static_assert(N % 2 == 0, "two accumulator tiles per ldmatrix");
  const T* lane_b = b + nt_lane_offset<DP>(lane);
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < N; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < DP / 16; kk++) {
    uint32_t af[MI][4];
    load_a(kk, af);
    nt_step<T, DP, N, MI>(acc, af, lane_b, kk);
  }
}

/** The same with A's fragments in registers (all of DP for each row tile). */
template <typename T, int DP, int N, int MI>
__device__ __forceinline__ void warp_mma_nt(float (&acc)[MI][N][4], const uint32_t (&a)[MI][DP / 16][4], const T* b, int lane) {
  warp_mma_nt_by_steps<T, DP, N, MI>(acc, b, lane, [&](int kk, uint32_t (&af)[MI][4]) {
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) af[i][e] = a[i][kk][e];
  });
}

/** The same for one row tile. */
template <typename T, int DP, int N>
__device__ __forceinline__ void warp_mma_nt(float (&acc)[N][4], const uint32_t (&a)[DP / 16][4], const T* b, int lane) {
  warp_mma_nt<T, DP, N, 1>(one_tile(acc), one_tile(a), b, lane);
}

/**
 * The same with A's MI 16-row tiles in shared memory (16 MI rows from a_rows, DP + 8
 * apart), one fragment per tile loaded per k16 step: fewer registers.
 */
template <typename T, int DP, int N, int MI>
__device__ __forceinline__ void warp_mma_nt(float (&acc)[MI][N][4], const T* a_rows, const T* b, int lane) {
  const T* lane_a = a_rows + (lane & 15) * (DP + 8) + (lane >> 4) * 8;
  warp_mma_nt_by_steps<T, DP, N, MI>(acc, b, lane, [&](int kk, uint32_t (&af)[MI][4]) {
#pragma unroll
    for (int i = 0; i < MI; i++) ptx::ldmatrix_x4(af[i], lane_a + 16 * i * (DP + 8) + kk * 16);
  });
}

/** The same for one row tile. */
template <typename T, int DP, int N>
__device__ __forceinline__ void warp_mma_nt(float (&acc)[N][4], const T* a_rows16, const T* b, int lane) {
  warp_mma_nt<T, DP, N, 1>(one_tile(acc), a_rows16, b, lane);
}

/**
 * acc_i (16 x DP) += P_i B for the warp's MI row tiles i, P_i (16 x 8 N) in accumulator
 * layout (rounded to T here), B the first 8 N rows of a shared tile (rows DP + 8 apart),
 * each B fragment loaded once for the MI tiles: O += P V, dV += P^T dO, dK += dS^T Q,
 * dQ += dS K.
 */
/** This lane's ldmatrix .trans row in B for mma_nn_k16: row 8 ((i / 8) % 2) + i % 8 of a k16 step, columns 8 (i / 16) of a tile pair. */
template <int DP>
__device__ __forceinline__ int nn_lane_offset(int lane) {
  return (((lane >> 3) & 1) * 8 + (lane & 7)) * (DP + 8) + (lane >> 4) * 8;
}

/** One k16 step of acc_i += P_i B: pf[i], the A fragment of 16 columns of P_i; lane_b, this lane's row of the step's 16 rows of B. */
template <typename T, int DP, int MI>
__device__ __forceinline__ void mma_nn_k16(float (&acc)[MI][DP / 8][4], const uint32_t (&pf)[MI][4], const T* lane_b) {
#pragma unroll
  for (int j = 0; j < DP / 8; j += 2) {
    uint32_t r[4];
    ptx::ldmatrix_x4_trans(r, lane_b + j * 8);
    const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
    for (int i = 0; i < MI; i++) {
      ptx::mma_m16n8k16<T>(acc[i][j], pf[i], b0);
      ptx::mma_m16n8k16<T>(acc[i][j + 1], pf[i], b1);
    }
  }
}

/** 16 columns of a 16-row accumulator-layout tile (tiles 2 kc and 2 kc + 1), rounded to T, as an A fragment. */
template <typename T, int N>
__device__ __forceinline__ void a_fragment(uint32_t (&f)[4], const float (&p)[N][4], int kc) {
  f[0] = pack2<T>(p[2 * kc][0], p[2 * kc][1]);
  f[1] = pack2<T>(p[2 * kc][2], p[2 * kc][3]);
  f[2] = pack2<T>(p[2 * kc + 1][0], p[2 * kc + 1][1]);
  f[3] = pack2<T>(p[2 * kc + 1][2], p[2 * kc + 1][3]);
}

template <typename T, int DP, int N, int MI>
__device__ __forceinline__ void warp_mma_nn(float (&acc)[MI][DP / 8][4], const float (&p)[MI][N][4], const T* b, int lane) {
  static_assert(N % 2 == 0, "16 columns of P per product step");
  const T* lane_b = b + nn_lane_offset<DP>(lane);
#pragma unroll
  for (int kc = 0; kc < N / 2; kc++) {
    uint32_t pf[MI][4];
#pragma unroll
    for (int i = 0; i < MI; i++) a_fragment<T>(pf[i], p[i], kc);
    mma_nn_k16<T, DP, MI>(acc, pf, lane_b + kc * 16 * (DP + 8));
  }
}

/** acc (16 x DP) += P B for one row tile whose A fragments are already rounded: pf[kc] holds columns 16 kc.. of P. */
template <typename T, int DP, int K16>
__device__ __forceinline__ void warp_mma_nn_fragments(float (&acc)[DP / 8][4], const uint32_t (&pf)[K16][4], const T* b, int lane) {
  const T* lane_b = b + nn_lane_offset<DP>(lane);
#pragma unroll
  for (int kc = 0; kc < K16; kc++) mma_nn_k16<T, DP, 1>(one_tile(acc), reinterpret_cast<const uint32_t(&)[1][4]>(pf[kc]), lane_b + kc * 16 * (DP + 8));
}

/** The same for one row tile. */
template <typename T, int DP, int N>
__device__ __forceinline__ void warp_mma_nn(float (&acc)[DP / 8][4], const float (&p)[N][4], const T* b, int lane) {
  warp_mma_nn<T, DP, N, 1>(one_tile(acc), one_tile(p), b, lane);
}

/** Row `row` of a warp's 16 x DP accumulator (0..15: lane row g or g + 8), times mul, into columns < d of `dst`. */
template <typename T, int DP>
__device__ __forceinline__ void store_accumulator_row(T* dst, const float (&acc)[DP / 8][4], int upper, int qd, int d, float mul) {
#pragma unroll
  for (int j = 0; j < DP / 8; j++) {
    const int c = j * 8 + 2 * qd;
    if (c < d) dst[c] = from_f32<T>(acc[j][2 * upper] * mul);
    if (c + 1 < d) dst[c + 1] = from_f32<T>(acc[j][2 * upper + 1] * mul);
  }
}

/** How far (log2) a row's max may pass its reference max before the reference moves: p <= 2^8. */
constexpr float kRescaleLog2 = 8.0f;

/** Row max (or sum) over the 4 lanes that hold one accumulator row. */
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/**
 * One key tile of the forward's online softmax for a thread's two query rows, t_lo and
 * t_lo + 8, in accumulator layout (register 4 j + 2 hf + e of s: row hf, key
 * kv0 + 8 j + 2 qd + e). The raw scores s become p = 2^(s s_mul - m) and l, this lane's
 * share of the rows' sums, moves on (the caller sums a row's four lanes once, at the
 * end: row_sums). m is the rows' reference max (scaled, base 2), not always their
 * running max: it moves, rescaling l and o (the rows' output accumulators), only when
 * some row of the warp would otherwise see a p above 2^kRescaleLog2, so after the first
 * tiles most tiles skip the rescale's multiplies and exponentials (p <= 256 is exact in
 * f32 and bf16/f16's range; lse = m + log2 l holds for any reference m). Must be called
 * by the whole warp (the vote). `masked`: the tile reaches keys after a row, past the
 * sequence or before a row's first key (attention_tiles.h's first_key, from the window
 * and the batch item's docStarts row `docs`; the same for every lane of the warp); such tiles
 * mask first and scale each score. A tile with every key live under a positive scale
 * takes the max of the raw scores, scales it once, and makes each p with one FFMA and
 * one EX2.
 */
template <int R, int RO>
__device__ __forceinline__ void online_softmax_tile(float (&s)[R], float (&o)[RO], float (&m)[2], float (&l)[2], int kv0, int t_lo, int qd, int seq,
                                                    int window, const int* docs, bool masked, float s_mul) {
  const bool fast = !masked && s_mul > 0.0f;
  float mx[2] = {neg_inf(), neg_inf()};
  if (fast) {
#pragma unroll
    for (int i = 0; i < R; i++) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
    mx[0] = quad_max(mx[0]) * s_mul;
    mx[1] = quad_max(mx[1]) * s_mul;
  } else {
    // Row hf's live keys, as offsets c = 8 (i / 4) + (i % 2) from this lane's first key kv0 + 2 qd:
    // lo <= c <= lo + span, from the row's first key to the row itself or the sequence's
    // last key; one unsigned compare a score (c - lo < 0 wraps above any span). A row with
    // none moves lo past every c.
    unsigned lo[2], span[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      const int t = t_lo + 8 * hf, u0 = kv0 + 2 * qd, first = first_key(docs, t, seq, window) - u0, last = min(t, seq - 1) - u0;
      lo[hf] = static_cast<unsigned>(first <= last ? first : R * 2);
      span[hf] = static_cast<unsigned>(first <= last ? last - first : 0);
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
      const int hf = (i >> 1) & 1, c = 8 * (i >> 2) + (i & 1);
      const bool off = masked && static_cast<unsigned>(c) - lo[hf] > span[hf];
      s[i] = off ? neg_inf() : s[i] * s_mul;
      mx[hf] = fmaxf(mx[hf], s[i]);
    }
    mx[0] = quad_max(mx[0]);
    mx[1] = quad_max(mx[1]);
  }
  const float mul = fast ? s_mul : 1.0f;  // what s still needs
  // A row's first live key (m = -inf, mx finite) always moves m: -inf + 8 is -inf.
  const bool moves = mx[0] > m[0] + kRescaleLog2 || mx[1] > m[1] + kRescaleLog2;
  if (__any_sync(0xffffffffu, moves)) {
    float alpha[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      const float mn = fmaxf(m[hf], mx[hf]);
      // A row with every key so far masked (or past the sequence) keeps m = -inf: alpha
      // = 2^(-inf - 0) = 0 there, never NaN (its l and o are 0 anyway).
      alpha[hf] = exp2_ftz(m[hf] - (mn == neg_inf() ? 0.0f : mn));
      m[hf] = mn;
      l[hf] *= alpha[hf];
    }
#pragma unroll
    for (int i = 0; i < RO; i++) o[i] *= alpha[(i >> 1) & 1];
  }
  // The base of the exponentials: m, or 0 for a row with no live key yet (exp2 gives 0, never NaN).
  const float base[2] = {m[0] == neg_inf() ? 0.0f : m[0], m[1] == neg_inf() ? 0.0f : m[1]};
#pragma unroll
  for (int i = 0; i < R; i++) {
    const int hf = (i >> 1) & 1;
    s[i] = exp2_ftz(fmaf(s[i], mul, -base[hf]));
    l[hf] += s[i];
  }
}

/** The rows' sums from each lane's share (online_softmax_tile): whole-warp shuffles, before any lane leaves. */
__device__ __forceinline__ void row_sums(float (&l)[2]) {
  l[0] = quad_sum(l[0]);
  l[1] = quad_sum(l[1]);
}

/** A 16-row tile's accumulator tiles float[N][4] as one fragment of 4 N registers (the same layout). */
template <int N>
__device__ __forceinline__ float (&flat(float (&x)[N][4]))[4 * N] {
  return reinterpret_cast<float(&)[4 * N]>(x);
}

}  // namespace
}  // namespace kiln
