// attention_tc.h: the tensor-core pieces the bf16/f16 attention kernels share
// (attention_forward_tc.cu, attention_backward_tc.cu): 16-bit tiles in shared
// memory, and warp products over 16-row strips through WMMA fragments with f32
// accumulators. Rows of 16-bit tiles are padded by 8 elements and f32 rows by 4
// (16-byte aligned rows, skewed banks); with 16-row strips every fragment pointer
// stays 32-byte aligned.
#pragma once
#include "attention_tiles.h"

#if defined(KILN_CUDA_SIM)
#include "sim/wmma_sim.h"
#else
#include <mma.h>
#endif

namespace kiln {
namespace {

#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(KILN_CUDA_SIM)
#define KILN_ATTENTION_TC 1
#endif

constexpr int kTcWarps = 4;
using TcAccumulator = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

/** rows x DP tile of T from `src` (rows `stride` apart), zeros past `valid` rows and `d` columns. */
template <typename T, int DP>
__device__ __forceinline__ void load_tile_t(T* dst, int ld, const T* src, int64_t stride, int rows, int valid, int d) {
  for (int i = threadIdx.x; i < rows * DP; i += kTcWarps * 32) {
    const int r = i / DP, c = i % DP;
    dst[r * ld + c] = (r < valid && c < d) ? src[r * stride + c] : from_f32<T>(0.0f);
  }
}

#if defined(KILN_ATTENTION_TC)
/** dst (16 x N, f32) = A (16 x DP) B^T, B given as N rows of DP: S = Q K^T, dP = dO V^T and their transposes. */
template <typename T, int DP, int N>
__device__ __forceinline__ void warp_product_nt(float* dst, int ldd, const T* a, int lda, const T* b, int ldb) {
  using namespace nvcuda;
#pragma unroll
  for (int j = 0; j < N / 16; j++) {
    TcAccumulator acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < DP / 16; kk++) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, lda);
      wmma::load_matrix_sync(fb, b + j * 16 * ldb + kk * 16, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(dst + j * 16, acc, ldd, wmma::mem_row_major);
  }
}

/** acc[j] += A (16 x K) B[:, 16j..16j+16), B given as K rows: O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS K. */
template <typename T, int K, int NF>
__device__ __forceinline__ void warp_product_nn(TcAccumulator (&acc)[NF], const T* a, int lda, const T* b, int ldb) {
  using namespace nvcuda;
#pragma unroll
  for (int kk = 0; kk < K / 16; kk++) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + kk * 16, lda);
#pragma unroll
    for (int j = 0; j < NF; j++) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, b + kk * 16 * ldb + j * 16, ldb);
      wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
  }
}

/**
 * The warp's 16 x (16 NF) accumulators, times mul, into rows 0..valid-1 of `dst`
 * (rows `stride` apart, columns < d) through `stage` (16 x (16 NF + 4) f32, this warp's).
 */
template <typename T, int NF>
__device__ __forceinline__ void warp_store_rows(T* dst, int64_t stride, int valid, int d, const TcAccumulator (&acc)[NF], float* stage, float mul) {
  using namespace nvcuda;
  constexpr int LD = NF * 16 + 4;
#pragma unroll
  for (int j = 0; j < NF; j++) wmma::store_matrix_sync(stage + j * 16, acc[j], LD, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x & 31;
  for (int i = lane; i < 16 * d; i += 32) {
    const int r = i / d, c = i % d;
    if (r < valid) dst[r * stride + c] = from_f32<T>(stage[r * LD + c] * mul);
  }
  __syncwarp();
}
#endif

/**
 * Tensor cores for 16-bit dtypes with headDim and vHeadDim (d_max, the wider) up to 128,
 * unless the device was opened with KILN_ATTENTION_PATH=simt. The tensor-core kernels
 * take vHeadDim != headDim as they are: tiles are DP = bucket(d_max) wide, Q and K zero
 * padded past headDim, V and dO past vHeadDim, so every product stays exact.
 */
inline bool attention_tc_allowed(const KernelCall& c, int dtype, int d_max) {
  return !c.simt_attention && d_max <= 128 && (dtype == kBF16 || dtype == kF16);
}

}  // namespace
}  // namespace kiln
