// chunk_partials.h: the second pass of the kernels that sum rows by chunks (sumRows, the
// norm backwards' parameter gradients). The first pass wrote one f32 partial row per
// chunk (partial[c * cols + j]); this one adds them in a fixed order, so the result does
// not depend on the schedule: row lane ty of a block of 32 columns adds its contiguous
// range of chunks in order, then the 8 range sums are added in lane order.
#pragma once
#include "kiln_cuda.h"

namespace kiln {
// Internal linkage: each kernel file that includes this has its own copy.
namespace {

constexpr int kPartialCols = 32;   // columns per block (threadIdx.x)
constexpr int kPartialLanes = 8;   // chunk ranges per column (threadIdx.y)

/**
 * out[j] = (accumulate ? out[j] : 0) + sum over chunks of partial[c * cols + j]; the same
 * for partial2 into out2 when they are given (dWeight and dBias in one launch).
 */
template <typename TO>
__global__ void __launch_bounds__(kPartialCols * kPartialLanes) sum_chunk_partials_kernel(const float* partial, TO* out, const float* partial2, TO* out2,
                                                                                          int chunks, int cols, bool accumulate) {
  __shared__ float lanes[2][kPartialLanes][kPartialCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int j = blockIdx.x * kPartialCols + tx;
  const int per = (chunks + kPartialLanes - 1) / kPartialLanes;
  const int q1 = (ty + 1) * per < chunks ? (ty + 1) * per : chunks;
  float t = 0.f, t2 = 0.f;
  if (j < cols) {
    for (int q = ty * per; q < q1; q++) {
      t += partial[int64_t{q} * cols + j];
      if (partial2) t2 += partial2[int64_t{q} * cols + j];
    }
  }
  lanes[0][ty][tx] = t;
  lanes[1][ty][tx] = t2;
  __syncthreads();
  if (ty == 0 && j < cols) {
    float sum = lanes[0][0][tx], sum2 = lanes[1][0][tx];
#pragma unroll
    for (int q = 1; q < kPartialLanes; q++) {
      sum += lanes[0][q][tx];
      sum2 += lanes[1][q][tx];
    }
    out[j] = from_f32<TO>((accumulate ? to_f32(out[j]) : 0.f) + sum);
    if (out2) out2[j] = from_f32<TO>((accumulate ? to_f32(out2[j]) : 0.f) + sum2);
  }
}

/** The grid of a column-sum pass over (rows, cols): blocks of 32 column groups x 8 row lanes. */
constexpr int kSumCols = 32;   // column groups per block (threadIdx.x)
constexpr int kSumLanes = 8;   // row lanes per block (threadIdx.y)

struct RowChunks {
  int64_t col_tiles;       // blocks across the columns (grid x)
  int64_t chunks;          // blocks down the rows (grid y): partial rows to add
  int64_t rows_per_chunk;
};

/**
 * Chunks of at least 64 rows, enough for ~1024 blocks in all (at most 65535 down), for
 * columns in groups of `group` (1, or one 16-byte vector): a function of the shape only,
 * so every run splits alike.
 */
inline RowChunks plan_row_chunks(int64_t rows, int cols, int group) {
  RowChunks p;
  p.col_tiles = ceil_div(cols, kSumCols * group);
  int64_t chunks = (rows + 63) / 64;
  const int64_t want = (1024 + p.col_tiles - 1) / p.col_tiles;
  if (chunks > want) chunks = want;
  if (chunks > 65535) chunks = 65535;
  if (chunks < 1) chunks = 1;
  p.rows_per_chunk = (rows + chunks - 1) / chunks;
  p.chunks = (rows + p.rows_per_chunk - 1) / p.rows_per_chunk;
  return p;
}

/** Where a column-sum block's thread works in plan_row_chunks' grid: its first column j0 (kW from there) and its chunk's rows [r0, r1). */
struct ColumnSumPlace {
  int j0;
  int64_t r0, r1;
};

template <int kW>
__device__ __forceinline__ ColumnSumPlace column_sum_place(int64_t rows, int64_t rows_per_chunk) {
  const int64_t r0 = int64_t{blockIdx.y} * rows_per_chunk;
  return {static_cast<int>((blockIdx.x * kSumCols + threadIdx.x) * kW), r0, r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows};
}

/**
 * The end of a column-sum block of plan_row_chunks' grid (kSumCols groups of kW columns x
 * kSumLanes row lanes): each thread's kW column sums `s` go through `lanes` (shared), the
 * row lanes are added in lane order, and each column's block sum is written to the
 * chunk's partial row (partial[blockIdx.y * cols + j]), or with partial null onto out
 * (added to it when `accumulate`).
 */
template <typename TO, int kW>
__device__ __forceinline__ void finish_column_sums(float (&lanes)[kSumLanes][kSumCols * kW + 1], const float (&s)[kW], TO* out, float* partial,
                                                   int cols, bool accumulate) {
  const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
  for (int e = 0; e < kW; e++) lanes[ty][tx * kW + e] = s[e];
  __syncthreads();
  for (int cj = ty * kSumCols + tx; cj < kSumCols * kW; cj += kSumCols * kSumLanes) {
    const int j = blockIdx.x * kSumCols * kW + cj;
    if (j >= cols) continue;
    float t = lanes[0][cj];
#pragma unroll
    for (int q = 1; q < kSumLanes; q++) t += lanes[q][cj];
    if (partial != nullptr) partial[int64_t{blockIdx.y} * cols + j] = t;
    else out[j] = from_f32<TO>((accumulate ? to_f32(out[j]) : 0.f) + t);
  }
}

/** Launches sum_chunk_partials_kernel over `cols` columns on `stream`, as kernel `name`. */
template <typename TO>
void launch_sum_chunk_partials(const char* name, cudaStream_t stream, const float* partial, TO* out, const float* partial2, TO* out2, int chunks, int cols,
                               bool accumulate) {
  launch(name, sum_chunk_partials_kernel<TO>, ceil_div(static_cast<size_t>(cols), kPartialCols), dim3(kPartialCols, kPartialLanes), 0, stream, partial, out,
         partial2, out2, chunks, cols, accumulate);
}

}  // namespace
}  // namespace kiln
