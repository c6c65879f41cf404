// matmul_tiles.h: the CUDA-core (SIMT) tile product that the matmuls share
// (matmul.cu's SIMT kernel, grouped_matmul.cu's groupedMatmul and
// groupedMatmulWeightGrad). 256 threads compute a BM x BN = (64 GM) x (64 GN) tile of
// op(A) @ op(B), each thread a (4 GM) x (4 GN) register tile; the depth advances 16 at
// a time through double-buffered shared tiles stored depth-major (sA[d][m], sB[d][n],
// f32), loaded from global memory through registers (the next tile's loads are in
// flight during the current tile's FMAs), transposes and zero-filled edges handled by
// the loader. Each output element is one thread's fixed sequence of f32 FMAs over the
// depth; the caller writes the register tile out.
#pragma once
#include <type_traits>

#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kSimtThreads = 256;  // 16 x 16
constexpr int kSimtBK = 16;

/** Four consecutive floats from 16-byte aligned shared memory. */
__device__ __forceinline__ void load4(const float* src, float* dst) {
#if defined(KILN_CUDA_SIM)
  dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2]; dst[3] = src[3];
#else
  const float4 v = *reinterpret_cast<const float4*>(src);
  dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
#endif
}

/**
 * Where the SIMT tile product reads op(A)(i, d) and op(B)(d, j), op(A) (m, depth), op(B)
 * (depth, n). Two layouts with the same offsets for dense operands, kept apart because
 * ptxas allocates registers differently for them and each kernel keeps the one it was
 * tuned with:
 *   DenseOperands: stored densely (rows one after another), offsets from m, n and depth
 *     with 32 x 32 -> 64-bit products:
 *       op(A)(i, d) = ta ? A[d * m + i] : A[i * depth + d]      op(B)(d, j) = tb ? B[j * depth + d] : B[d * n + j]
 *   StridedOperands: 64-bit leading dimensions lda, ldb (row strides as stored):
 *       op(A)(i, d) = ta ? A[d * lda + i] : A[i * lda + d]      op(B)(d, j) = tb ? B[j * ldb + d] : B[d * ldb + j]
 */
struct DenseOperands {};
struct StridedOperands {
  int64_t lda, ldb;
};

/**
 * One thread's part of a block's SIMT tile product, acc = op(A)[m0 : m0 + BM, :] @
 * op(B)[:, n0 : n0 + BN] (addressed as in DenseOperands / StridedOperands). Thread
 * (tx, ty) = (tid % 16, tid / 16) owns tile rows g*64 + ty*4 + {0..3} (g < GM) and
 * columns h*64 + tx*4 + {0..3} (h < GN). Loads: thread tid fetches LA elements of the
 * BM x 16 A tile and LB of the 16 x BN B tile, consecutive threads along the stored
 * matrix's contiguous dimension:
 *   A (m, depth): d = tid % 16, rows tid / 16 + 16 l      A (depth, m): row tid % BM, d = tid / BM + (256 / BM) l
 *   B (depth, n): col tid % BN, d = tid / BN + (256 / BN) l      B (n, depth): d = tid % 16, cols tid / 16 + 16 l
 * The object holds the thread's load slots: the dense matmul builds it once, before its
 * loops; the grouped kernels build it per tile, as they were tuned.
 */
template <typename T, int GM, int GN>
struct SimtTile {
  static constexpr int BK = kSimtBK, BM = 64 * GM, BN = 64 * GN, TM = 4 * GM, TN = 4 * GN;
  static constexpr int LA = BM * BK / kSimtThreads, LB = BN * BK / kSimtThreads;
  // The double-buffered shared tiles, depth-major; declare them `__shared__ __align__(16)`.
  using SharedA = float[2][BK][BM + 4];  // rows stay 16-byte aligned
  using SharedB = float[2][BK][BN + 4];

  bool ta, tb;
  int tx, ty;
  // Load slots (see above): fixed coordinate *_fix, moving coordinate *_mov + *_step * l.
  int a_fix, a_mov, a_step, b_fix, b_mov, b_step;

  __device__ __forceinline__ SimtTile(bool trans_a, bool trans_b) : ta(trans_a), tb(trans_b) {
    const int tid = static_cast<int>(threadIdx.x);
    tx = tid % 16;
    ty = tid / 16;
    a_fix = ta ? tid % BM : tid % BK, a_mov = ta ? tid / BM : tid / BK, a_step = ta ? kSimtThreads / BM : kSimtThreads / BK;
    b_fix = tb ? tid % BK : tid % BN, b_mov = tb ? tid / BK : tid / BN, b_step = tb ? kSimtThreads / BK : kSimtThreads / BN;
  }

  /**
   * acc = op(A)[m0 : m0 + BM, :] @ op(B)[:, n0 : n0 + BN]. Every thread of the block
   * calls it; it ends with a barrier, so sA / sB can be refilled at once.
   */
  template <typename Operands>
  __device__ __forceinline__ void product(const T* A, const T* B, const Operands& at, int m, int n, int depth, int m0, int n0, SharedA& sA, SharedB& sB,
                                          float (&acc)[TM][TN]) const {
    constexpr bool kDense = std::is_same<Operands, DenseOperands>::value;
    const T zero = from_f32<T>(0.f);
    T ra[LA], rb[LB];
    auto load_regs = [&](int d0) {
#pragma unroll
      for (int l = 0; l < LA; l++) {
        const int mov = a_mov + a_step * l;
        const int gi = m0 + (ta ? a_fix : mov), gd = d0 + (ta ? mov : a_fix);
        if constexpr (kDense) ra[l] = (gi < m && gd < depth) ? A[ta ? int64_t{gd} * m + gi : int64_t{gi} * depth + gd] : zero;
        else ra[l] = (gi < m && gd < depth) ? A[ta ? gd * at.lda + gi : gi * at.lda + gd] : zero;
      }
#pragma unroll
      for (int l = 0; l < LB; l++) {
        const int mov = b_mov + b_step * l;
        const int gj = n0 + (tb ? mov : b_fix), gd = d0 + (tb ? b_fix : mov);
        if constexpr (kDense) rb[l] = (gj < n && gd < depth) ? B[tb ? int64_t{gj} * depth + gd : int64_t{gd} * n + gj] : zero;
        else rb[l] = (gj < n && gd < depth) ? B[tb ? gj * at.ldb + gd : gd * at.ldb + gj] : zero;
      }
    };
    auto store_smem = [&](int buf) {
#pragma unroll
      for (int l = 0; l < LA; l++) {
        const int mov = a_mov + a_step * l;
        if (ta) sA[buf][mov][a_fix] = to_f32(ra[l]);
        else sA[buf][a_fix][mov] = to_f32(ra[l]);
      }
#pragma unroll
      for (int l = 0; l < LB; l++) {
        const int mov = b_mov + b_step * l;
        if (tb) sB[buf][b_fix][mov] = to_f32(rb[l]);
        else sB[buf][mov][b_fix] = to_f32(rb[l]);
      }
    };

#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
      for (int j = 0; j < TN; j++) acc[i][j] = 0.f;

    const int dtiles = (depth + BK - 1) / BK;
    load_regs(0);
    store_smem(0);
    __syncthreads();
    for (int dt = 0; dt < dtiles; dt++) {
      const int buf = dt & 1;
      const bool more = dt + 1 < dtiles;
      if (more) load_regs((dt + 1) * BK);  // global loads in flight during the math below
#pragma unroll
      for (int dd = 0; dd < BK; dd++) {
        float av[TM], bv[TN];
#pragma unroll
        for (int g = 0; g < GM; g++) load4(&sA[buf][dd][g * 64 + ty * 4], &av[g * 4]);
#pragma unroll
        for (int h = 0; h < GN; h++) load4(&sB[buf][dd][h * 64 + tx * 4], &bv[h * 4]);
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
          for (int j = 0; j < TN; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
      // buf ^ 1 was last read in iteration dt - 1, which every thread finished (barrier below).
      if (more) store_smem(buf ^ 1);
      __syncthreads();
    }
  }
};

}  // namespace
}  // namespace kiln
