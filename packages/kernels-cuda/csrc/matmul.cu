// matmul.cu: batched GEMM and the row sum that is a linear layer's bias gradient,
// in f32 / bf16 / f16 storage with f32 accumulation.
//
// matmul: for each batch item i
//   C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
// Row-major. op(A) is (m, k): A stored (m, k) (lda = k), or (k, m) when transA (lda = m).
// op(B) is (k, n): B stored (k, n) (ldb = n), or (n, k) when transB (ldb = k).
// C is (m, n), ldc = n. Batch item i starts at i * stride{A,B,C} elements (stride 0
// broadcasts one matrix). bias (length n, optional) is added to every row. C does
// not overlap A, B or bias. Each output element is computed by one block with a fixed
// sequence of f32 operations over k (no split-k, no atomics): results do not depend
// on block or thread order.
//   - SIMT path (f32, and every dtype with KILN_MATMUL_PATH=simt): a block computes a
//     BM x BN tile of C (64x64 or 128x128) with 256 threads, each a (4*GM) x (4*GN)
//     register tile; k advances 16 at a time through double-buffered shared memory
//     tiles stored k-major (sA[k][m], sB[k][n], f32), loaded from global memory with
//     transposes and edges (zero fill) handled by the loader.
//   - Tensor-core path (bf16/f16; the simulator emulates it, sim/wmma_sim.h): nvcuda::wmma
//     16x16x16 fragments with f32 accumulators; each warp owns FM x FN fragments of
//     the block tile; operand tiles (k step 32) are copied to shared memory in their
//     stored layout, zero padded at the edges, and read as row- or column-major
//     fragments; the epilogue goes through a per-warp f32 staging tile.
//   - cuBLASLt (csrc/blas), when the backend loaded it (see src/cuda-backend.ts):
//     tried first for every call; kiln's kernels run what it has no algorithm for.
//   KILN_MATMUL_PATH=simt (read when the device opens) forces the SIMT kernel for every dtype.
//
// sumRows: out[j] = (accumulate ? out[j] : 0) + sum_i x[i, j], x (rows, cols) row-major.
// Blocks of 32 columns x 8 row lanes sum a chunk of rows each; with one chunk the
// block writes out directly, otherwise it writes an f32 partial per (chunk, column)
// to scratch and a second kernel adds the partials in chunk order (deterministic).
#include <type_traits>

#include "blas/cublaslt_matmul.h"
#include "kiln_cuda.h"

#if defined(KILN_CUDA_SIM)
#include "sim/wmma_sim.h"
#else
#include <mma.h>
#endif

namespace kiln {
namespace {

template <typename T>
struct MatmulParams {
  const T* a;
  const T* b;
  const T* bias;  // nullptr: no bias
  T* c;
  int m, n, k;
  int64_t batch;
  int64_t stride_a, stride_b, stride_c;
  float alpha;
  bool trans_a, trans_b, accumulate;
};

/** Combined output value: (alpha * dot + bias) [+ old C]. */
template <typename T>
__device__ __forceinline__ void store_out(const MatmulParams<T>& p, T* crow, int j, float dot, float bias) {
  float v = p.alpha * dot + bias;
  if (p.accumulate) v += to_f32(crow[j]);
  crow[j] = from_f32<T>(v);
}

// ---------------------------------------------------------------------------------
// SIMT kernel
// ---------------------------------------------------------------------------------

constexpr int kSimtThreads = 256;  // 16 x 16 threads
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

// Block tile BM x BN = (64 GM) x (64 GN). Thread (tx, ty) owns rows g*64 + ty*4 + {0..3}
// (g < GM) and columns h*64 + tx*4 + {0..3} (h < GN) of the tile.
// Loads: thread tid fetches LA elements of the BM x BK A tile and LB of the BK x BN B
// tile, consecutive threads along the stored matrix's contiguous dimension:
//   A (m, k): k = tid % 16, rows tid / 16 + 16 l      A (k, m): row tid % BM, k = tid / BM + (256 / BM) l
//   B (k, n): col tid % BN, k = tid / BN + (256 / BN) l      B (n, k): k = tid % 16, cols tid / 16 + 16 l
template <typename T, int GM, int GN>
__global__ void __launch_bounds__(kSimtThreads) matmul_simt_kernel(MatmulParams<T> p) {
  constexpr int BK = kSimtBK, BM = 64 * GM, BN = 64 * GN, TM = 4 * GM, TN = 4 * GN;
  constexpr int LDA = BM + 4, LDB = BN + 4;  // rows stay 16-byte aligned
  constexpr int LA = BM * BK / kSimtThreads, LB = BN * BK / kSimtThreads;
  __shared__ __align__(16) float sA[2][BK][LDA];
  __shared__ __align__(16) float sB[2][BK][LDB];

  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int m = p.m, n = p.n, k = p.k;
  const bool ta = p.trans_a, tb = p.trans_b;
  const int n0 = blockIdx.x * BN;
  const int ktiles = (k + BK - 1) / BK;
  const T zero = from_f32<T>(0.f);

  // Load slots (see above): fixed coordinate a_fix, moving coordinate a_mov + a_step * l.
  const int a_fix = ta ? tid % BM : tid % BK, a_mov = ta ? tid / BM : tid / BK, a_step = ta ? kSimtThreads / BM : kSimtThreads / BK;
  const int b_fix = tb ? tid % BK : tid % BN, b_mov = tb ? tid / BK : tid / BN, b_step = tb ? kSimtThreads / BK : kSimtThreads / BN;

  for (int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.stride_a;
    const T* B = p.b + bz * p.stride_b;
    T* C = p.c + bz * p.stride_c;
    for (int64_t my = blockIdx.y; my * BM < m; my += gridDim.y) {
      const int m0 = static_cast<int>(my * BM);
      T ra[LA], rb[LB];
      auto load_regs = [&](int k0) {
#pragma unroll
        for (int l = 0; l < LA; l++) {
          const int mov = a_mov + a_step * l;
          const int gi = m0 + (ta ? a_fix : mov), gk = k0 + (ta ? mov : a_fix);
          ra[l] = (gi < m && gk < k) ? A[ta ? int64_t{gk} * m + gi : int64_t{gi} * k + gk] : zero;
        }
#pragma unroll
        for (int l = 0; l < LB; l++) {
          const int mov = b_mov + b_step * l;
          const int gj = n0 + (tb ? mov : b_fix), gk = k0 + (tb ? b_fix : mov);
          rb[l] = (gj < n && gk < k) ? B[tb ? int64_t{gj} * k + gk : int64_t{gk} * n + gj] : zero;
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

      float acc[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.f;

      load_regs(0);
      store_smem(0);
      __syncthreads();
      for (int kt = 0; kt < ktiles; kt++) {
        const int buf = kt & 1;
        const bool more = kt + 1 < ktiles;
        if (more) load_regs((kt + 1) * BK);  // global loads in flight during the math below
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
          float av[TM], bv[TN];
#pragma unroll
          for (int g = 0; g < GM; g++) load4(&sA[buf][kk][g * 64 + ty * 4], &av[g * 4]);
#pragma unroll
          for (int h = 0; h < GN; h++) load4(&sB[buf][kk][h * 64 + tx * 4], &bv[h * 4]);
#pragma unroll
          for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        // buf ^ 1 was last read in iteration kt - 1, which every thread finished (barrier below).
        if (more) store_smem(buf ^ 1);
        __syncthreads();
      }

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

constexpr int kWmmaBK = 32;
constexpr int kWmmaPad = 8;  // 16-bit elements; keeps rows 16-byte aligned, skews banks

/**
 * Copies the ROWS x COLS tile at (r0, c0) of a row-major matrix (R x Cc, leading
 * dimension ld) into shared memory dst (leading dimension LD), zero past the edges.
 * Eight consecutive columns per step: one 16-byte load when `vec` (base, ld and batch
 * stride multiples of 8 elements) and the eight are inside the matrix.
 */
template <typename T, int ROWS, int COLS, int LD, int NT>
__device__ __forceinline__ void load_tile16(T* dst, const T* src, int64_t ld, int r0, int R, int c0, int Cc, bool vec) {
  constexpr int CHUNKS = COLS / 8, PER_THREAD = ROWS * CHUNKS / NT;
  static_assert(ROWS * CHUNKS % NT == 0 && NT % CHUNKS == 0, "tile chunks must divide among the threads");
  const T zero = from_f32<T>(0.f);
  const int cc = (threadIdx.x % CHUNKS) * 8, gc = c0 + cc;
#pragma unroll
  for (int l = 0; l < PER_THREAD; l++) {
    const int r = threadIdx.x / CHUNKS + l * (NT / CHUNKS), gr = r0 + r;
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

// Block tile BM x BN = (16 FM WARPS_M) x (16 FN WARPS_N); warp (wm, wn) owns the
// 16 FM x 16 FN sub-tile at (wm * 16 FM, wn * 16 FN). Shared tiles keep the stored
// layout: A (m, k) -> sA[BM][BK] read row-major; A (k, m) -> sA[BK][BM] read
// column-major; likewise B (k, n) -> sB[BK][BN] row-major, B (n, k) -> sB[BN][BK]
// column-major.
template <typename T, bool TA, bool TB, int WARPS_M, int WARPS_N, int FM, int FN>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32) matmul_wmma_kernel(MatmulParams<T> p, bool vec_a, bool vec_b) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(KILN_CUDA_SIM)
  using namespace nvcuda;
  constexpr int NT = WARPS_M * WARPS_N * 32, NW = WARPS_M * WARPS_N;
  constexpr int BK = kWmmaBK, BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16;
  constexpr int A_ROWS = TA ? BK : BM, A_COLS = TA ? BM : BK, A_LD = A_COLS + kWmmaPad;
  constexpr int B_ROWS = TB ? BN : BK, B_COLS = TB ? BK : BN, B_LD = B_COLS + kWmmaPad;
  constexpr int C_LD = 16 + 4;
  using LayoutA = typename std::conditional<TA, wmma::col_major, wmma::row_major>::type;
  using LayoutB = typename std::conditional<TB, wmma::col_major, wmma::row_major>::type;
  __shared__ __align__(128) T sA[A_ROWS * A_LD];
  __shared__ __align__(128) T sB[B_ROWS * B_LD];
  __shared__ __align__(128) float sC[NW][16 * C_LD];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int m = p.m, n = p.n, k = p.k;
  const int n0 = blockIdx.x * BN;

  for (int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.stride_a;
    const T* B = p.b + bz * p.stride_b;
    T* C = p.c + bz * p.stride_c;
    for (int64_t my = blockIdx.y; my * BM < m; my += gridDim.y) {
      const int m0 = static_cast<int>(my * BM);
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) wmma::fill_fragment(acc[i][j], 0.f);

      for (int k0 = 0; k0 < k; k0 += BK) {
        __syncthreads();  // every warp is done with the previous tiles
        if (TA) load_tile16<T, A_ROWS, A_COLS, A_LD, NT>(sA, A, m, k0, k, m0, m, vec_a);
        else load_tile16<T, A_ROWS, A_COLS, A_LD, NT>(sA, A, k, m0, m, k0, k, vec_a);
        if (TB) load_tile16<T, B_ROWS, B_COLS, B_LD, NT>(sB, B, k, n0, n, k0, k, vec_b);
        else load_tile16<T, B_ROWS, B_COLS, B_LD, NT>(sB, B, n, k0, k, n0, n, vec_b);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa[FM];
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb[FN];
#pragma unroll
          for (int i = 0; i < FM; i++) {
            const int row = (wm * FM + i) * 16;  // op(A) element (row + r, kk + q)
            const T* src = TA ? sA + kk * A_LD + row : sA + row * A_LD + kk;
            wmma::load_matrix_sync(fa[i], src, A_LD);
          }
#pragma unroll
          for (int j = 0; j < FN; j++) {
            const int col = (wn * FN + j) * 16;  // op(B) element (kk + q, col + c)
            const T* src = TB ? sB + col * B_LD + kk : sB + kk * B_LD + col;
            wmma::load_matrix_sync(fb[j], src, B_LD);
          }
#pragma unroll
          for (int i = 0; i < FM; i++)
#pragma unroll
            for (int j = 0; j < FN; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
      }

      // Epilogue: each fragment goes through this warp's f32 staging tile.
      float* stage = sC[warp];
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) {
          wmma::store_matrix_sync(stage, acc[i][j], C_LD, wmma::mem_row_major);
          __syncwarp();
          const int gi0 = m0 + (wm * FM + i) * 16, gj0 = n0 + (wn * FN + j) * 16;
#pragma unroll
          for (int t = 0; t < 8; t++) {  // lanes 0..15 take row 2t, lanes 16..31 row 2t + 1
            const int e = t * 32 + lane, r = e / 16, cc = e % 16, gi = gi0 + r, gj = gj0 + cc;
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


template <typename T, bool TA, bool TB, int WARPS_M, int WARPS_N, int FM, int FN>
void launch_wmma_cfg(const MatmulParams<T>& p, cudaStream_t stream) {
  constexpr int BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16;
  const int lda = TA ? p.m : p.k, ldb = TB ? p.k : p.n;
  const bool vec_a = is_aligned16(p.a) && lda % 8 == 0 && p.stride_a % 8 == 0;
  const bool vec_b = is_aligned16(p.b) && ldb % 8 == 0 && p.stride_b % 8 == 0;
  const int64_t mt = (p.m + BM - 1) / BM;
  dim3 grid(ceil_div(p.n, BN), static_cast<unsigned>(mt < 65535 ? mt : 65535), static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  launch("matmul", matmul_wmma_kernel<T, TA, TB, WARPS_M, WARPS_N, FM, FN>, grid, dim3(WARPS_M * WARPS_N * 32), 0, stream, p, vec_a, vec_b);
}

template <typename T, bool TA, bool TB>
void launch_wmma_t(const MatmulParams<T>& p, cudaStream_t stream) {
  const int64_t tiles128 = int64_t{ceil_div(p.m, 128)} * ceil_div(p.n, 128) * p.batch;
  if (tiles128 >= 128) launch_wmma_cfg<T, TA, TB, 2, 4, 4, 2>(p, stream);  // 128 x 128, 8 warps of 64 x 32
  else launch_wmma_cfg<T, TA, TB, 2, 2, 2, 2>(p, stream);                  // 64 x 64, 4 warps of 32 x 32
}

template <typename T>
void launch_wmma(const MatmulParams<T>& p, cudaStream_t stream) {
  if (p.trans_a) {
    if (p.trans_b) launch_wmma_t<T, true, true>(p, stream);
    else launch_wmma_t<T, true, false>(p, stream);
  } else {
    if (p.trans_b) launch_wmma_t<T, false, true>(p, stream);
    else launch_wmma_t<T, false, false>(p, stream);
  }
}


template <typename T, int GM, int GN>
void launch_simt_cfg(const MatmulParams<T>& p, cudaStream_t stream) {
  const int64_t mt = (p.m + 64 * GM - 1) / (64 * GM);
  dim3 grid(ceil_div(p.n, 64 * GN), static_cast<unsigned>(mt < 65535 ? mt : 65535), static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  launch("matmul", matmul_simt_kernel<T, GM, GN>, grid, dim3(kSimtThreads), 0, stream, p);
}

template <typename T>
void launch_simt(const MatmulParams<T>& p, cudaStream_t stream) {
  // 128 x 128 tiles once there are enough of them to fill the GPU, else 64 x 64.
  const int64_t tiles128 = int64_t{ceil_div(p.m, 128)} * ceil_div(p.n, 128) * p.batch;
  if (tiles128 >= 128) launch_simt_cfg<T, 2, 2>(p, stream);
  else launch_simt_cfg<T, 1, 1>(p, stream);
}

// matmul: a, b, bias, c | m, n, k, batch, transA, transB, strideA, strideB, strideC, alpha, accumulate, dtype
void launch_matmul(const KernelCall& c) {
  dispatch_float(c.i32(15), "matmul", [&](auto tag) {
    using T = decltype(tag);
    MatmulParams<T> p;
    p.a = c.ptr<const T>(0);
    p.b = c.ptr<const T>(1);
    p.bias = c.ptr<const T>(2);
    p.c = c.ptr<T>(3);
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
#if !defined(KILN_CUDA_SIM)
    if (c.blas) {
      const BlasMatmul b{p.a, p.b, p.bias, p.c, p.m, p.n, p.k, p.batch, p.trans_a, p.trans_b, p.stride_a, p.stride_b, p.stride_c, p.alpha, p.accumulate, c.i32(15)};
      if (static_cast<CublasLt*>(c.blas)->matmul(b, c.stream, c.scratch(CublasLt::kWorkspaceBytes), CublasLt::kWorkspaceBytes)) return;
    }
#endif
    // Every architecture this addon is built for (sm_80 and newer) has bf16/f16 tensor cores.
    if constexpr (!std::is_same<T, float>::value) {
      if (!c.simt_matmul) {
        launch_wmma<T>(p, c.stream);
        return;
      }
    }
    launch_simt<T>(p, c.stream);
  });
}

// ---------------------------------------------------------------------------------
// sumRows
// ---------------------------------------------------------------------------------

constexpr int kSumCols = 32;   // columns per block (threadIdx.x)
constexpr int kSumLanes = 8;   // row lanes per block (threadIdx.y)
constexpr int kFinalThreads = 256;

/**
 * Block (x, y) sums rows [y * rows_per_chunk, ...) of columns [x * 32, x * 32 + 32):
 * row lane ty takes every 8th row, then lane sums are added in lane order. partial
 * null: the block covers all rows and writes out; else partial[y * cols + j].
 */
template <typename T>
__global__ void __launch_bounds__(kSumCols * kSumLanes) sum_rows_kernel(const T* x, T* out, float* partial, int64_t rows, int cols, int64_t rows_per_chunk, bool accumulate) {
  __shared__ float lanes[kSumLanes][kSumCols + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int j = blockIdx.x * kSumCols + tx;
  const int64_t r0 = int64_t{blockIdx.y} * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float s = 0.f;
  if (j < cols) {
    const T* col = x + j;
#pragma unroll 4
    for (int64_t r = r0 + ty; r < r1; r += kSumLanes) s += to_f32(col[r * cols]);
  }
  lanes[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && j < cols) {
    float t = lanes[0][tx];
#pragma unroll
    for (int q = 1; q < kSumLanes; q++) t += lanes[q][tx];
    if (partial != nullptr) partial[int64_t{blockIdx.y} * cols + j] = t;
    else out[j] = from_f32<T>((accumulate ? to_f32(out[j]) : 0.f) + t);
  }
}

/** out[j] = (accumulate ? out[j] : 0) + sum over chunks, in chunk order. */
template <typename T>
__global__ void __launch_bounds__(kFinalThreads) sum_rows_final_kernel(const float* partial, T* out, int chunks, int cols, bool accumulate) {
  const int j = blockIdx.x * kFinalThreads + threadIdx.x;
  if (j >= cols) return;
  float t = 0.f;
  for (int q = 0; q < chunks; q++) t += partial[int64_t{q} * cols + j];
  out[j] = from_f32<T>((accumulate ? to_f32(out[j]) : 0.f) + t);
}

// sumRows: x, out | rows, cols, accumulate, dtype
void launch_sum_rows(const KernelCall& c) {
  const int64_t rows = c.i64(2);
  const int cols = c.i32(3);
  const bool accumulate = c.flag(4);
  // Enough chunks of at least 64 rows for ~1024 blocks in all (at most 65535).
  const int64_t col_tiles = ceil_div(cols, kSumCols);
  int64_t chunks = (rows + 63) / 64;
  const int64_t want = (1024 + col_tiles - 1) / col_tiles;
  if (chunks > want) chunks = want;
  if (chunks > 65535) chunks = 65535;
  if (chunks < 1) chunks = 1;
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  dispatch_float(c.i32(5), "sumRows", [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.ptr<const T>(0);
    T* out = c.ptr<T>(1);
    const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
    const dim3 block(kSumCols, kSumLanes);
    if (chunks == 1) {
      launch("sumRows", sum_rows_kernel<T>, grid, block, 0, c.stream, x, out, static_cast<float*>(nullptr), rows, cols, rows_per_chunk, accumulate);
      return;
    }
    float* partial = static_cast<float*>(c.scratch(static_cast<size_t>(chunks) * cols * sizeof(float)));
    launch("sumRows", sum_rows_kernel<T>, grid, block, 0, c.stream, x, out, partial, rows, cols, rows_per_chunk, accumulate);
    launch("sumRows", sum_rows_final_kernel<T>, dim3(ceil_div(cols, kFinalThreads)), dim3(kFinalThreads), 0, c.stream,
           static_cast<const float*>(partial), out, static_cast<int>(chunks), cols, accumulate);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("matmul", launch_matmul);
KILN_REGISTER_KERNEL("sumRows", launch_sum_rows);

}  // namespace kiln
