// grouped_rows.h: how a grouped-matmul block finds its rows from the device offsets
// (groups + 1 i32: group g is rows [offsets[g], offsets[g+1]) of `rows`), shared by the
// CUDA-core and tensor-core kernels (grouped_matmul.cu, grouped_matmul_tc.cu).
#pragma once
#include "block_scan.h"
#include "kiln_cuda.h"

namespace kiln {

/** Group g's rows [start, end), clamped to [0, rows] so bad offsets cannot address outside the operands. */
__device__ __forceinline__ void group_rows(const int32_t* offsets, int g, int rows, int& start, int& end) {
  int s = offsets[g], e = offsets[g + 1];
  s = s < 0 ? 0 : (s > rows ? rows : s);
  e = e < s ? s : (e > rows ? rows : e);
  start = s;
  end = e;
}

/** Upper bound on sum_g ceil(rows_g / bm), the row tiles of all groups: a grid size the host knows. */
inline int64_t grouped_row_tiles_bound(int64_t rows, int groups, int bm) { return (rows + bm - 1) / bm + groups; }

/**
 * Lays the groups' row tiles (ceil(rows_g / BM) each) end to end and finds tile `tile`:
 * its group (-1 past the last tile) and its index within the group. A block-wide scan
 * of the tile counts, blockDim.x groups at a time; every thread of the block calls it
 * and gets the same answer. `scratch`: 36 ints of shared memory.
 */
template <int BM>
__device__ __forceinline__ int find_group_tile(const int32_t* offsets, int groups, int rows, int tile, int32_t* scratch, int& tile_in_group) {
  int32_t* found = scratch + 33;  // group, tile in group
  if (threadIdx.x == 0) found[0] = -1;
  __syncthreads();
  int32_t carry = 0;
  for (int g0 = 0; g0 < groups && carry <= tile; g0 += static_cast<int>(blockDim.x)) {
    const int g = g0 + static_cast<int>(threadIdx.x);
    int32_t tiles = 0;
    if (g < groups) {
      int start, end;
      group_rows(offsets, g, rows, start, end);
      tiles = (end - start + BM - 1) / BM;
    }
    int32_t step;
    const int32_t first = carry + block_exclusive_sum(tiles, scratch, step);
    if (tile >= first && tile < first + tiles) {
      found[0] = g;
      found[1] = tile - first;
    }
    carry += step;
  }
  __syncthreads();
  const int g = found[0];
  tile_in_group = found[1];
  return g;
}

}  // namespace kiln
