// matmul.cu: batched GEMM and the row sum that is a linear layer's bias gradient,
// in f32 / bf16 / f16 storage with f32 accumulation.
//
// matmul: for each batch item i
//   C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
// Row-major. op(A) is (m, k): A stored (m, k), or (k, m) when transA, its rows lda apart
// (k, or m when transA, by default; more for a matrix inside a wider one).
// op(B) is (k, n): B stored (k, n) (ldb = n), or (n, k) when transB (ldb = k).
// C is (m, n), ldc = n, in the dtype of A and B or, for bf16/f16 operands, in f32
// (cDtype: a parameter gradient kept in f32; the f32 sum is stored, or added to the
// old f32 C, without a 16-bit rounding). Batch item i starts at i * stride{A,B,C} elements (stride 0
// broadcasts one matrix). bias (length n, optional) is added to every row. C does
// not overlap A, B or bias. Each output element is computed by one block with a fixed
// sequence of f32 operations over k (no split-k, no atomics): results do not depend
// on block or thread order.
//   - SIMT path (f32, and every dtype with KILN_MATMUL_PATH=simt): a block computes a
//     BM x BN tile of C (64x64 or 128x128) with 256 threads, each a (4*GM) x (4*GN)
//     register tile; k advances 16 at a time through double-buffered shared memory
//     tiles stored k-major (sA[k][m], sB[k][n], f32), loaded from global memory with
//     transposes and edges (zero fill) handled by the loader. The tile product is
//     matmul_tiles.h's, shared with the grouped matmuls.
//   - Pipelined tensor-core path (bf16/f16, matmul_mma.cu): mma.sync m16n8k16 fed by
//     ldmatrix from a 4-stage cp.async ring; used whenever every operand allows 16-byte
//     copies (16-byte aligned base, leading dimension and batch stride multiples of 8).
//   - wgmma path (bf16/f16 on sm_90, matmul_wgmma.cu): Hopper's warpgroup mma reading
//     both operands from a 4-stage cp.async ring in 128-byte-swizzled shared memory,
//     under the same 16-byte copy condition; kiln's own kernel on sm_90 (the mma.sync
//     one with KILN_MATMUL_PATH=mma); on the simulator with KILN_MATMUL_PATH=wgmma.
//   - WMMA path (bf16/f16 otherwise; the simulator emulates it, sim/wmma_sim.h): nvcuda::wmma
//     16x16x16 fragments with f32 accumulators; 64x64 block tiles, each of the 4 warps
//     owning 2 x 2 fragments; operand tiles (k step 32) are copied to shared memory in their
//     stored layout, zero padded at the edges, and read as row- or column-major
//     fragments (matmul_tiles_tc.h, shared with the grouped matmuls); the epilogue
//     goes through a per-warp f32 staging tile.
//   - cuBLASLt (csrc/blas), when the backend loaded it (see src/cuda-backend.ts):
//     tried first for every call; kiln's kernels run what it has no algorithm for.
//   KILN_MATMUL_PATH=simt (read when the device opens) forces the SIMT kernel for every dtype,
//   KILN_MATMUL_PATH=wmma the WMMA kernel for bf16/f16, =mma the mma.sync one (also on
//   sm_90), =wgmma the wgmma kernel (sm_90 or the simulator).
//
// sumRows: out[j] = (accumulate ? out[j] : 0) + sum_i x[i, j], x (rows, cols) row-major;
// out in x's dtype or f32 (gradDtype). Blocks of 32 column groups x 8 row lanes sum a
// chunk of rows each (a group is one column, or one 16-byte vector of columns when the
// rows are whole vectors at an aligned address); with one chunk the
// block writes out directly, otherwise it writes an f32 partial per (chunk, column)
// to scratch and a second kernel (chunk_partials.h) adds the partials in a fixed order (contiguous
// ranges of at most 8 chunks, then the ranges by a fixed pairwise tree: deterministic).
#include <type_traits>

#include "blas/cublaslt_matmul.h"
#include "chunk_partials.h"
#include "kiln_cuda.h"
#include "matmul_params.h"
#include "matmul_tiles.h"
#include "matmul_tiles_tc.h"
#include "vector_io.h"

namespace kiln {
namespace {

/** Combined output value: (alpha * dot + bias) [+ old C]. */
template <typename T, typename TC>
__device__ __forceinline__ void store_out(const MatmulParams<T, TC>& p, TC* crow, int j, float dot, float bias) {
  float v = p.alpha * dot + bias;
  if (p.accumulate) v += to_f32(crow[j]);
  crow[j] = from_f32<TC>(v);
}

// ---------------------------------------------------------------------------------
// SIMT kernel
// ---------------------------------------------------------------------------------

// Block tile BM x BN = (64 GM) x (64 GN), the product of matmul_tiles.h; the epilogue
// adds alpha, the bias and the old C.
// Operands: DenseOperands (A's rows k, or m when transposed, apart: the layout the kernel
// was tuned with) or StridedOperands (A's rows lda apart).
template <typename T, typename TC, int GM, int GN, typename Operands>
__global__ void __launch_bounds__(kSimtThreads) matmul_simt_kernel(MatmulParams<T, TC> p) {
  using Tile = SimtTile<T, GM, GN>;
  constexpr int BM = Tile::BM, BN = Tile::BN;
  __shared__ __align__(16) typename Tile::SharedA sA;
  __shared__ __align__(16) typename Tile::SharedB sB;

  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int m = p.m, n = p.n, k = p.k;
  const int n0 = blockIdx.x * BN;
  const Tile tile(p.trans_a, p.trans_b);

  for (int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.stride_a;
    const T* B = p.b + bz * p.stride_b;
    TC* C = p.c + bz * p.stride_c;
    for (int64_t my = blockIdx.y; my * BM < m; my += gridDim.y) {
      const int m0 = static_cast<int>(my * BM);
      float acc[Tile::TM][Tile::TN];
      if constexpr (std::is_same<Operands, DenseOperands>::value) tile.product(A, B, DenseOperands{}, m, n, k, m0, n0, sA, sB, acc);
      else tile.product(A, B, StridedOperands{p.lda, p.trans_b ? k : n}, m, n, k, m0, n0, sA, sB, acc);

#pragma unroll
      for (int h = 0; h < GN; h++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int gj = n0 + h * 64 + tx * 4 + j;
          if (gj >= n) continue;
          const float bias = p.bias ? to_f32(p.bias[gj]) : 0.f;
#pragma unroll
          for (int g = 0; g < GM; g++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
              const int gi = m0 + g * 64 + ty * 4 + i;
              if (gi < m) store_out(p, C + int64_t{gi} * n, gj, acc[g * 4 + i][h * 4 + j], bias);
            }
        }
    }
  }
}

// ---------------------------------------------------------------------------------
// Tensor-core kernel (sm_80 and newer; the simulator emulates its fragments)
// ---------------------------------------------------------------------------------

// Block tile BM x BN = (16 FM WARPS_M) x (16 FN WARPS_N), the product of
// matmul_tiles_tc.h; the epilogue adds alpha, the bias and the old C.
template <typename T, typename TC, bool TA, bool TB, int WARPS_M, int WARPS_N, int FM, int FN>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32) matmul_wmma_kernel(MatmulParams<T, TC> p, bool vec_a, bool vec_b) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(KILN_CUDA_SIM)
  using namespace nvcuda;
  using Tile = WmmaTile<T, TA, TB, WARPS_M, WARPS_N, FM, FN>;
  constexpr int C_LD = kWmmaStageLd;
  __shared__ __align__(128) T sA[Tile::A_ROWS * Tile::A_LD];
  __shared__ __align__(128) T sB[Tile::B_ROWS * Tile::B_LD];
  __shared__ __align__(128) float sC[Tile::NW][16 * C_LD];

  const Tile tile;
  const int m = p.m, n = p.n, k = p.k;
  const int n0 = blockIdx.x * Tile::BN;

  for (int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.stride_a;
    const T* B = p.b + bz * p.stride_b;
    TC* C = p.c + bz * p.stride_c;
    for (int64_t my = blockIdx.y; my * Tile::BM < m; my += gridDim.y) {
      const int m0 = static_cast<int>(my * Tile::BM);
      WmmaAccumulator acc[FM][FN];
      tile.product(A, p.lda, vec_a, B, vec_b, m, n, k, m0, n0, sA, sB, acc);

      // Epilogue: each fragment goes through this warp's f32 staging tile.
      float* stage = sC[tile.warp];
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) {
          wmma::store_matrix_sync(stage, acc[i][j], C_LD, wmma::mem_row_major);
          __syncwarp();
          const int gi0 = m0 + (tile.wm * FM + i) * 16, gj0 = n0 + (tile.wn * FN + j) * 16;
#pragma unroll
          for (int t = 0; t < 8; t++) {  // lanes 0..15 take row 2t, lanes 16..31 row 2t + 1
            const int e = t * 32 + tile.lane, r = e / 16, cc = e % 16, gi = gi0 + r, gj = gj0 + cc;
            if (gi < m && gj < n) store_out(p, C + int64_t{gi} * n, gj, stage[r * C_LD + cc], p.bias ? to_f32(p.bias[gj]) : 0.f);
          }
          __syncwarp();  // staging tile free for the next fragment
        }
    }
  }
#else
  (void)p; (void)vec_a; (void)vec_b;
#endif
}


template <typename T, typename TC, bool TA, bool TB, int WARPS_M, int WARPS_N, int FM, int FN>
void launch_wmma_cfg(const MatmulParams<T, TC>& p, cudaStream_t stream) {
  constexpr int BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16;
  const int ldb = TB ? p.k : p.n;
  const bool vec_a = is_aligned16(p.a) && p.lda % 8 == 0 && p.stride_a % 8 == 0;
  const bool vec_b = is_aligned16(p.b) && ldb % 8 == 0 && p.stride_b % 8 == 0;
  const int64_t mt = (p.m + BM - 1) / BM;
  dim3 grid(ceil_div(p.n, BN), static_cast<unsigned>(mt < 65535 ? mt : 65535), static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  launch("matmul", matmul_wmma_kernel<T, TC, TA, TB, WARPS_M, WARPS_N, FM, FN>, grid, dim3(WARPS_M * WARPS_N * 32), 0, stream, p, vec_a, vec_b);
}

// One tile size, 64 x 64 on 4 warps of 32 x 32: this kernel runs only the operands the
// pipelined kernels cannot copy 16 bytes at a time (or KILN_MATMUL_PATH=wmma), and a
// second, 128 x 128 instance of its 16 (dtype, transpose) variants would double the
// file's device compile for that rare path.
template <typename T, typename TC, bool TA, bool TB>
void launch_wmma_t(const MatmulParams<T, TC>& p, cudaStream_t stream) {
  launch_wmma_cfg<T, TC, TA, TB, 2, 2, 2, 2>(p, stream);
}

template <typename T, typename TC>
void launch_wmma(const MatmulParams<T, TC>& p, cudaStream_t stream) {
  if (p.trans_a) {
    if (p.trans_b) launch_wmma_t<T, TC, true, true>(p, stream);
    else launch_wmma_t<T, TC, true, false>(p, stream);
  } else {
    if (p.trans_b) launch_wmma_t<T, TC, false, true>(p, stream);
    else launch_wmma_t<T, TC, false, false>(p, stream);
  }
}


template <typename T, typename TC, int GM, int GN, typename Operands>
void launch_simt_cfg(const MatmulParams<T, TC>& p, cudaStream_t stream) {
  const int64_t mt = (p.m + 64 * GM - 1) / (64 * GM);
  dim3 grid(ceil_div(p.n, 64 * GN), static_cast<unsigned>(mt < 65535 ? mt : 65535), static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  launch("matmul", matmul_simt_kernel<T, TC, GM, GN, Operands>, grid, dim3(kSimtThreads), 0, stream, p);
}

template <typename T, typename TC>
void launch_simt(const MatmulParams<T, TC>& p, cudaStream_t stream) {
  // An A inside a wider one (lda past its rows) on 64 x 64 tiles alone: a second layout
  // of the 128 x 128 instances would add their compile for a call only the padded
  // training loss makes, where cuBLASLt or the tensor-core kernels run it on a GPU.
  if (p.lda != (p.trans_a ? p.m : p.k)) return launch_simt_cfg<T, TC, 1, 1, StridedOperands>(p, stream);
  // 128 x 128 tiles once there are enough of them to fill the GPU, else 64 x 64.
  const int64_t tiles128 = int64_t{ceil_div(p.m, 128)} * ceil_div(p.n, 128) * p.batch;
  if (tiles128 >= 128) launch_simt_cfg<T, TC, 2, 2, DenseOperands>(p, stream);
  else launch_simt_cfg<T, TC, 1, 1, DenseOperands>(p, stream);
}

// matmul: a, b, bias, c | m, n, k, batch, transA, transB, strideA, strideB, strideC, alpha, accumulate, dtype, cDtype, lda
void launch_matmul(const KernelCall& c) {
  dispatch_float_grad(c.i32(15), c.i32(16), "matmul", [&](auto tag, auto c_tag) {
    using T = decltype(tag);
    using TC = decltype(c_tag);
    MatmulParams<T, TC> p;
    p.a = c.ptr<const T>(0);
    p.b = c.ptr<const T>(1);
    p.bias = c.ptr<const T>(2);
    p.c = c.ptr<TC>(3);
    p.m = c.i32(4);
    p.n = c.i32(5);
    p.k = c.i32(6);
    p.batch = c.i64(7);
    p.trans_a = c.flag(8);
    p.trans_b = c.flag(9);
    p.stride_a = c.i64(10);
    p.stride_b = c.i64(11);
    p.stride_c = c.i64(12);
    p.alpha = c.f32(13);
    p.accumulate = c.flag(14);
    p.lda = c.i64(17);
#if !defined(KILN_CUDA_SIM)
    if (c.blas) {
      const BlasMatmul b{p.a, p.b, p.bias, p.c, p.m, p.n, p.k, p.batch, p.trans_a, p.trans_b, p.lda, p.stride_a, p.stride_b, p.stride_c, p.alpha, p.accumulate, c.i32(15), c.i32(16)};
      if (static_cast<CublasLt*>(c.blas)->matmul(b, c.stream, c.scratch(CublasLt::kWorkspaceBytes), CublasLt::kWorkspaceBytes)) return;
    }
#endif
    // Every architecture this addon is built for (sm_80 and newer) has bf16/f16 tensor
    // cores: the pipelined mma kernel (matmul_mma.cu), or WMMA where an operand's layout
    // rules out its 16-byte copies (or with KILN_MATMUL_PATH=wmma).
    if constexpr (!std::is_same<T, float>::value) {
      if (!c.simt_matmul) {
        if (c.wmma_matmul) launch_wmma(p, c.stream);
        else if (!(c.wgmma_matmul && launch_matmul_wgmma(p, c.matmul_tiles, c.stream)) && !launch_matmul_mma(p, c.matmul_tiles, c.stream)) launch_wmma(p, c.stream);
        return;
      }
    }
    launch_simt(p, c.stream);
  });
}

// ---------------------------------------------------------------------------------
// sumRows
// ---------------------------------------------------------------------------------

/**
 * Block (x, y) sums rows [y * rows_per_chunk, ...) of columns [x * 32 kW, (x + 1) * 32 kW):
 * thread tx owns kW adjacent columns (kW = 1, or one 16-byte vector of x per row when
 * every row is whole vectors at an aligned address); row lane ty takes every 8th row,
 * then lane sums are added in lane order. partial null: the block covers all rows and
 * writes out; else partial[y * cols + j].
 */
template <typename T, typename TO, int kW>
__global__ void __launch_bounds__(kSumCols * kSumLanes) sum_rows_kernel(const T* x, TO* out, float* partial, int64_t rows, int cols, int64_t rows_per_chunk, bool accumulate) {
  __shared__ float lanes[kSumLanes][kSumCols * kW + 1];
  const auto [j0, r0, r1] = column_sum_place<kW>(rows, rows_per_chunk);
  float s[kW];
#pragma unroll
  for (int e = 0; e < kW; e++) s[e] = 0.f;
  if (j0 < cols) {
    const T* col = x + j0;
#pragma unroll 4
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumLanes) {
      if constexpr (kW == 1) {
        s[0] += to_f32(col[r * cols]);
      } else {
        float v[kW];
        load_group(col + r * cols, true, v);
#pragma unroll
        for (int e = 0; e < kW; e++) s[e] += v[e];
      }
    }
  }
  finish_column_sums<TO, kW>(lanes, s, out, partial, cols, accumulate);
}

// sumRows: x, out | rows, cols, accumulate, dtype, gradDtype (out's)
void launch_sum_rows(const KernelCall& c) {
  const int64_t rows = c.i64(2);
  const int cols = c.i32(3);
  const bool accumulate = c.flag(4);
  dispatch_float_grad(c.i32(5), c.i32(6), "sumRows", [&](auto tag, auto out_tag) {
    using T = decltype(tag);
    using TO = decltype(out_tag);
    const T* x = c.ptr<const T>(0);
    TO* out = c.ptr<TO>(1);
    constexpr int kVec = Group<T>::N;
    const bool vec = cols % kVec == 0 && is_aligned16(x);
    const RowChunks plan = plan_row_chunks(rows, cols, vec ? kVec : 1);
    const int64_t col_tiles = plan.col_tiles, chunks = plan.chunks, rows_per_chunk = plan.rows_per_chunk;
    float* partial = chunks == 1 ? nullptr : static_cast<float*>(c.scratch(static_cast<size_t>(chunks) * cols * sizeof(float)));
    const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
    const dim3 block(kSumCols, kSumLanes);
    if (vec) launch("sumRows", sum_rows_kernel<T, TO, kVec>, grid, block, 0, c.stream, x, out, partial, rows, cols, rows_per_chunk, accumulate);
    else launch("sumRows", sum_rows_kernel<T, TO, 1>, grid, block, 0, c.stream, x, out, partial, rows, cols, rows_per_chunk, accumulate);
    if (partial) {
      launch_sum_chunk_partials<TO>("sumRows", c.stream, partial, out, static_cast<int>(chunks), cols, accumulate);
    }
  });
}

}  // namespace

KILN_REGISTER_KERNEL("matmul", launch_matmul);
KILN_REGISTER_KERNEL("sumRows", launch_sum_rows);

}  // namespace kiln
