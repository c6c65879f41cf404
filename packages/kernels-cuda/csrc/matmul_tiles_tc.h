// matmul_tiles_tc.h: the tensor-core tile product that the bf16 / f16 matmuls share
// (matmul.cu's WMMA kernel, grouped_matmul_tc.cu's groupedMatmul and
// groupedMatmulWeightGrad): nvcuda::wmma 16x16x16 fragments with f32 accumulators (the
// simulator emulates them, sim/wmma_sim.h). Block tile BM x BN = (16 FM WARPS_M) x
// (16 FN WARPS_N), depth step 32; warp (wm, wn) owns the 16 FM x 16 FN sub-tile at
// (wm * 16 FM, wn * 16 FN). Operand tiles keep their stored layout in shared memory
// (rows padded by 8 elements, zero past the edges): A (m, depth) -> sA[BM][BK] read
// row-major; A (depth, m) -> sA[BK][BM] read column-major; likewise B (depth, n) ->
// sB[BK][BN] row-major, B (n, depth) -> sB[BN][BK] column-major. Each output element is
// one warp's fixed sequence of MMAs; the caller writes the fragments out (through a
// per-warp f32 staging tile of 16 x kWmmaStageLd).
#pragma once
#include <type_traits>

#include "kiln_cuda.h"

#if defined(KILN_CUDA_SIM)
#include "sim/wmma_sim.h"
#else
#include <mma.h>
#endif

namespace kiln {
namespace {

constexpr int kWmmaBK = 32;
constexpr int kWmmaPad = 8;             // 16-bit elements: rows stay 16-byte aligned, banks skew
constexpr int kWmmaStageLd = 16 + 4;    // f32 staging tile of the epilogue

/**
 * Copies the ROWS x COLS tile at (r0, c0) of a row-major matrix (R x Cc, leading
 * dimension ld) into shared memory dst (leading dimension LD), zero past the edges.
 * Eight consecutive columns per step: one 16-byte load when `vec` (src 16-byte aligned,
 * ld a multiple of 8 elements) and the eight are inside the matrix.
 */
template <typename T, int ROWS, int COLS, int LD, int NT, typename Tid>
__device__ __forceinline__ void load_tile16(T* dst, const T* src, int64_t ld, int r0, int R, int c0, int Cc, bool vec, Tid tid) {
  constexpr int CHUNKS = COLS / 8, PER_THREAD = ROWS * CHUNKS / NT;
  static_assert(ROWS * CHUNKS % NT == 0 && NT % CHUNKS == 0, "tile chunks must divide among the threads");
  const T zero = from_f32<T>(0.f);
  const int cc = (tid % CHUNKS) * 8, gc = c0 + cc;
#pragma unroll
  for (int l = 0; l < PER_THREAD; l++) {
    const int r = tid / CHUNKS + l * (NT / CHUNKS), gr = r0 + r;
    T* d = dst + r * LD + cc;
    const T* s = src + gr * ld + gc;
    if (vec && gr < R && gc + 8 <= Cc) {
      *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) d[e] = (gr < R && gc + e < Cc) ? s[e] : zero;
    }
  }
}

using WmmaAccumulator = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

/**
 * One thread's part of a block's tensor-core tile product: op(A) (m, depth) @ op(B)
 * (depth, n), row-major, B stored densely (rows one after another), A's rows lda apart:
 *   op(A)(i, d) = TA ? A[d * lda + i] : A[i * lda + d]      op(B)(d, j) = TB ? B[j * depth + d] : B[d * n + j]
 * Shared memory: T sA[A_ROWS * A_LD], T sB[B_ROWS * B_LD] (`__align__(128)`). Holds the
 * thread's index, warp and lane and the warp's place in the block tile (wm, wn);
 * construct it once per thread, before the kernel's loops. Tid, the thread index's
 * type: unsigned (threadIdx.x as it is) or int; the same arithmetic, but ptxas
 * allocates registers differently for the two, and each kernel keeps the one it was
 * tuned with.
 */
template <typename T, bool TA, bool TB, int WARPS_M, int WARPS_N, int FM, int FN, typename Tid = unsigned>
struct WmmaTile {
  static constexpr int NT = WARPS_M * WARPS_N * 32, NW = WARPS_M * WARPS_N, BK = kWmmaBK;
  static constexpr int BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16;
  static constexpr int FRAGS_M = FM, FRAGS_N = FN;  // this warp's fragments
  static constexpr bool kTransA = TA;
  static constexpr int A_ROWS = TA ? BK : BM, A_COLS = TA ? BM : BK, A_LD = A_COLS + kWmmaPad;
  static constexpr int B_ROWS = TB ? BN : BK, B_COLS = TB ? BK : BN, B_LD = B_COLS + kWmmaPad;
  using LayoutA = typename std::conditional<TA, nvcuda::wmma::col_major, nvcuda::wmma::row_major>::type;
  using LayoutB = typename std::conditional<TB, nvcuda::wmma::col_major, nvcuda::wmma::row_major>::type;

  Tid tid;
  int warp, lane, wm, wn;

  __device__ __forceinline__ WmmaTile()
      : tid(static_cast<Tid>(threadIdx.x)), warp(tid / 32), lane(tid % 32), wm(warp / WARPS_N), wn(warp % WARPS_N) {}

  /**
   * acc = op(A)[m0 : m0 + BM, :] @ op(B)[:, n0 : n0 + BN] for this warp's fragments,
   * A's stored rows lda apart (m when TA, depth otherwise, for a dense A).
   * vec_a / vec_b: 16-byte loads allowed (see load_tile16). Every thread of the block
   * calls it; the next call's first barrier protects sA / sB.
   */
  __device__ __forceinline__ void product(const T* A, int64_t lda, bool vec_a, const T* B, bool vec_b, int m, int n, int depth, int m0, int n0, T* sA,
                                          T* sB, WmmaAccumulator (&acc)[FM][FN]) const {
    using namespace nvcuda;
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int j = 0; j < FN; j++) wmma::fill_fragment(acc[i][j], 0.f);

    for (int d0 = 0; d0 < depth; d0 += BK) {
      __syncthreads();  // every warp is done with the previous tiles
      if (TA) load_tile16<T, A_ROWS, A_COLS, A_LD, NT>(sA, A, lda, d0, depth, m0, m, vec_a, tid);
      else load_tile16<T, A_ROWS, A_COLS, A_LD, NT>(sA, A, lda, m0, m, d0, depth, vec_a, tid);
      if (TB) load_tile16<T, B_ROWS, B_COLS, B_LD, NT>(sB, B, depth, n0, n, d0, depth, vec_b, tid);
      else load_tile16<T, B_ROWS, B_COLS, B_LD, NT>(sB, B, n, d0, depth, n0, n, vec_b, tid);
      __syncthreads();
#pragma unroll
      for (int dd = 0; dd < BK; dd += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa[FM];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb[FN];
#pragma unroll
        for (int i = 0; i < FM; i++) {
          const int row = (wm * FM + i) * 16;  // op(A) element (row + r, dd + q)
          const T* src = TA ? sA + dd * A_LD + row : sA + row * A_LD + dd;
          wmma::load_matrix_sync(fa[i], src, A_LD);
        }
#pragma unroll
        for (int j = 0; j < FN; j++) {
          const int col = (wn * FN + j) * 16;  // op(B) element (dd + q, col + c)
          const T* src = TB ? sB + col * B_LD + dd : sB + dd * B_LD + col;
          wmma::load_matrix_sync(fb[j], src, B_LD);
        }
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
          for (int j = 0; j < FN; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
    }
  }
};

}  // namespace
}  // namespace kiln
