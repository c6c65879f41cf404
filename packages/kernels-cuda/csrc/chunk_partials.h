// chunk_partials.h: the second pass of the kernels that sum rows by chunks (sumRows, the
// norm backwards' parameter gradients, the activation backwards' column sums). The first
// pass wrote one f32 partial row per chunk (partial[c * cols + j]); this one adds them in
// a fixed order, so the result does not depend on the schedule: row lane ty of a block
// of 32 columns adds its contiguous range of at most 8 chunks in order (independent
// loads, one memory latency), then the lanes' sums are added by a fixed pairwise tree.
// One launch sums up to three sets of partials (dWeight, dBias and dX's column sums of a
// norm backward), one set per grid row.
#pragma once
#include "kiln_cuda.h"

namespace kiln {
// Internal linkage: each kernel file that includes this has its own copy.
namespace {

constexpr int kPartialCols = 32;      // columns per block (threadIdx.x)
constexpr int kPartialMaxLanes = 32;  // chunk ranges per column at most (threadIdx.y)
constexpr int kPartialPerLane = 8;    // chunks a lane adds, where the lanes allow
constexpr int kPartialMaxSets = 3;

/** The partial rows and outputs of one launch: sets [0, count) of the arrays. */
template <typename TO>
struct PartialSets {
  const float* partial[kPartialMaxSets];
  TO* out[kPartialMaxSets];
};

/**
 * Lanes a column's chunks are split across: a power of two, enough for 8 chunks a lane,
 * at most 32; a function of the chunk count alone, so every run of a shape adds alike.
 */
inline int partial_lanes(int chunks) {
  int lanes = 1;
  while (lanes < kPartialMaxLanes && lanes * kPartialPerLane < chunks) lanes *= 2;
  return lanes;
}

/**
 * For set s = blockIdx.y: out_s[j] = (accumulate ? out_s[j] : 0) + sum over chunks of
 * partial_s[c * cols + j]. blockDim.y (a power of two) lanes split the chunks.
 */
template <typename TO>
__global__ void __launch_bounds__(kPartialCols * kPartialMaxLanes) sum_chunk_partials_kernel(PartialSets<TO> sets, int chunks, int cols, bool accumulate) {
  __shared__ float lanes[kPartialMaxLanes][kPartialCols];
  const int tx = threadIdx.x, ty = threadIdx.y, nl = static_cast<int>(blockDim.y);
  const int j = blockIdx.x * kPartialCols + tx;
  // Chosen by comparisons: an array of kernel parameters indexed at run time goes to the stack.
  const int set = blockIdx.y;
  const float* partial = set == 0 ? sets.partial[0] : set == 1 ? sets.partial[1] : sets.partial[2];
  const int per = (chunks + nl - 1) / nl;
  const int q0 = ty * per;
  const int q1 = q0 + per < chunks ? q0 + per : chunks;
  float t = 0.f;
  if (j < cols) {
#pragma unroll 8
    for (int q = q0; q < q1; q++) t += partial[int64_t{q} * cols + j];
  }
  lanes[ty][tx] = t;
  // Pairwise: lane ty takes lane ty + s's sum, s = nl / 2, ..., 1 (the same tree every run).
  for (int s = nl / 2; s > 0; s >>= 1) {
    __syncthreads();
    if (ty < s) lanes[ty][tx] += lanes[ty + s][tx];
  }
  if (ty == 0 && j < cols) {
    TO* out = set == 0 ? sets.out[0] : set == 1 ? sets.out[1] : sets.out[2];
    out[j] = from_f32<TO>((accumulate ? to_f32(out[j]) : 0.f) + lanes[0][tx]);
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

/** Launches sum_chunk_partials_kernel over `cols` columns for sets [0, count) on `stream`, as kernel `name`. */
template <typename TO>
void launch_sum_chunk_partials(const char* name, cudaStream_t stream, const PartialSets<TO>& sets, int count, int chunks, int cols, bool accumulate) {
  launch(name, sum_chunk_partials_kernel<TO>, dim3(static_cast<unsigned>(ceil_div(static_cast<size_t>(cols), kPartialCols)), static_cast<unsigned>(count)),
         dim3(kPartialCols, static_cast<unsigned>(partial_lanes(chunks))), 0, stream, sets, chunks, cols, accumulate);
}

/** The same for one set: out = (accumulate ? out : 0) + the column sums of `partial`'s chunk rows. */
template <typename TO>
void launch_sum_chunk_partials(const char* name, cudaStream_t stream, const float* partial, TO* out, int chunks, int cols, bool accumulate) {
  launch_sum_chunk_partials<TO>(name, stream, PartialSets<TO>{{partial, nullptr, nullptr}, {out, nullptr, nullptr}}, 1, chunks, cols, accumulate);
}

}  // namespace
}  // namespace kiln
