// grouped_matmul.cu: one matmul per group of rows (the experts of a mixture-of-experts
// layer), f32 / bf16 / f16 storage, f32 accumulation.
//   groupedMatmul:           C[r, :] = (accumulate ? C[r, :] : 0) + A[r, :] @ op(B_g)   for r in group g
//   groupedMatmulWeightGrad: dB_g += dC_g^T @ A_g
// offsets (groups + 1, i32, on the device): group g is rows [offsets[g], offsets[g+1]);
// a group may be empty. A (rows, k), C / dC (rows, n), row-major. B_g at g*k*n: (k, n),
// or (n, k) when transB (a torch Linear weight); dB_g (n, k) at g*n*k, in the dtype of A
// and dC or, with 16-bit inputs, in f32 (gradDtype).
// The host never reads the offsets: grids are sized for the worst case and blocks
// look their work up from the offsets.
//
// bf16 / f16 take the tensor-core kernels of grouped_matmul_tc.cu (same work split, WMMA
// fragments); f32, and every dtype with KILN_MATMUL_PATH=simt, the CUDA-core kernels here.
// The CUDA-core kernels run the dense matmul's SIMT tile product (matmul_tiles.h):
// 256 threads compute a BM x BN tile (64 x 64 or 128 x 128), each a (4 GM) x (4 GN)
// register tile; the depth advances 16 at a time through double-buffered shared tiles
// stored depth-major (f32), loaded with transposes and zero-filled edges. Each output
// element is one thread's fixed sequence of f32 FMAs (no split over the depth, no
// atomics): results do not depend on the order of blocks or threads.
//   groupedMatmul: grid.x enumerates the groups' row tiles laid end to end (group g
//     has ceil(rows_g / BM); at most ceil(rows / BM) + groups in all); a block finds
//     its group by a block-wide scan of the tile counts and exits past the last tile.
//     grid.y: column tiles of n.
//   groupedMatmulWeightGrad: grid (k tiles, n tiles, groups); the depth is the group's
//     rows; an empty group's blocks return without touching dB_g.
#include "grouped_matmul_tc.h"
#include "grouped_rows.h"
#include "kiln_cuda.h"
#include "matmul_tiles.h"

namespace kiln {
namespace {

/** C[i, j] (+)= acc for the tile at (m0, n0) of a (m, n) matrix with row stride ldc. */
template <typename T, int GM, int GN>
__device__ __forceinline__ void store_tile(T* C, int64_t ldc, int m, int n, int m0, int n0, bool accumulate, const float (&acc)[4 * GM][4 * GN]) {
  const int tid = static_cast<int>(threadIdx.x), tx = tid % 16, ty = tid / 16;
#pragma unroll
  for (int g = 0; g < GM; g++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int gi = m0 + g * 64 + ty * 4 + i;
      if (gi >= m) continue;
      T* row = C + int64_t{gi} * ldc;
#pragma unroll
      for (int h = 0; h < GN; h++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int gj = n0 + h * 64 + tx * 4 + j;
          if (gj >= n) continue;
          const float v = acc[g * 4 + i][h * 4 + j];
          row[gj] = from_f32<T>(accumulate ? to_f32(row[gj]) + v : v);
        }
    }
}

/** The product's shared tiles as one object (ptxas allocates these kernels' registers better so). */
template <typename Tile>
struct TileShared {
  typename Tile::SharedA a;
  typename Tile::SharedB b;
};

// Two blocks per SM for 64 x 64 tiles (left alone, ptxas picks 64 registers and spills).
template <typename T, bool TB, int GM, int GN>
__global__ void __launch_bounds__(kSimtThreads, GM == 1 ? 2 : 1) grouped_matmul_kernel(const T* a, const T* b, const int32_t* offsets, T* c, int rows, int n, int k, int groups, bool accumulate) {
  using Tile = SimtTile<T, GM, GN>;
  constexpr int BM = Tile::BM, BN = Tile::BN;
  __shared__ __align__(16) TileShared<Tile> s;
  __shared__ int32_t scratch[36];
  int row_tile;
  const int g = find_group_tile<BM>(offsets, groups, rows, static_cast<int>(blockIdx.x), scratch, row_tile);
  if (g < 0) return;  // past the last tile
  int start, end;
  group_rows(offsets, g, rows, start, end);
  const T* A = a + int64_t{start} * k;
  const T* B = b + int64_t{g} * k * n;
  T* C = c + int64_t{start} * n;
  for (int64_t ny = blockIdx.y; ny * BN < n; ny += gridDim.y) {
    const int n0 = static_cast<int>(ny * BN);
    float acc[Tile::TM][Tile::TN];
    const Tile tile(false, TB);
    tile.product(A, B, StridedOperands{k, TB ? k : n}, end - start, n, k, row_tile * BM, n0, s.a, s.b, acc);
    store_tile<T, GM, GN>(C, n, end - start, n, row_tile * BM, n0, accumulate, acc);
  }
}

template <typename T, typename G, int GM, int GN>
__global__ void __launch_bounds__(kSimtThreads) grouped_weight_grad_kernel(const T* a, const T* dc, const int32_t* offsets, G* db, int rows, int n, int k, int groups) {
  using Tile = SimtTile<T, GM, GN>;
  constexpr int BM = Tile::BM, BN = Tile::BN;
  __shared__ __align__(16) TileShared<Tile> s;
  for (int64_t g = blockIdx.z; g < groups; g += gridDim.z) {
    int start, end;
    group_rows(offsets, static_cast<int>(g), rows, start, end);
    if (end == start) continue;  // empty group: dB_g stays as it is
    const T* dC = dc + int64_t{start} * n;
    const T* A = a + int64_t{start} * k;
    G* dB = db + g * n * k;
    for (int64_t my = blockIdx.y; my * BM < n; my += gridDim.y) {
      const int m0 = static_cast<int>(my * BM), n0 = static_cast<int>(blockIdx.x) * BN;
      float acc[Tile::TM][Tile::TN];
      // op(A) = dC_g^T (n, depth): dC_g stored (depth, n); op(B) = A_g (depth, k).
      const Tile tile(true, false);
      tile.product(dC, A, StridedOperands{n, k}, n, k, end - start, m0, n0, s.a, s.b, acc);
      store_tile<G, GM, GN>(dB, k, n, k, m0, n0, true, acc);
    }
  }
}

unsigned clamp_grid(int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); }

template <typename T, bool TB, int GM, int GN>
void launch_grouped_cfg(const KernelCall& c, const GroupedDims& d) {
  const dim3 grid(static_cast<unsigned>(grouped_row_tiles_bound(d.rows, d.groups, 64 * GM)), clamp_grid((int64_t{d.n} + 64 * GN - 1) / (64 * GN)));
  launch("groupedMatmul", grouped_matmul_kernel<T, TB, GM, GN>, grid, dim3(kSimtThreads), 0, c.stream, c.ptr<const T>(0), c.ptr<const T>(1), c.ptr<const int32_t>(2), c.ptr<T>(3),
         d.rows, d.n, d.k, d.groups, d.accumulate);
}

template <typename T, bool TB>
void launch_grouped_simt(const KernelCall& c, const GroupedDims& d) {
  if (grouped_big_tiles(d)) launch_grouped_cfg<T, TB, 2, 2>(c, d);
  else launch_grouped_cfg<T, TB, 1, 1>(c, d);
}

// groupedMatmul: a, b, offsets, c | rows, n, k, groups, transB, accumulate, dtype
void launch_grouped_matmul(const KernelCall& c) {
  const GroupedDims d{c.i32(4), c.i32(5), c.i32(6), c.i32(7), c.flag(8), c.flag(9)};
  const int dtype = c.i32(10);
  if (dtype != kF32 && !c.simt_matmul) {
    grouped_matmul_tc(c, d, dtype);
    return;
  }
  dispatch_float(dtype, "groupedMatmul", [&](auto tag) {
    using T = decltype(tag);
    if (d.trans_b) launch_grouped_simt<T, true>(c, d);
    else launch_grouped_simt<T, false>(c, d);
  });
}

template <typename T, typename G, int GM, int GN>
void launch_weight_grad_cfg(const KernelCall& c, const GroupedDims& d) {
  const dim3 grid(ceil_div(d.k, 64 * GN), clamp_grid((int64_t{d.n} + 64 * GM - 1) / (64 * GM)), clamp_grid(d.groups));
  launch("groupedMatmulWeightGrad", grouped_weight_grad_kernel<T, G, GM, GN>, grid, dim3(kSimtThreads), 0, c.stream, c.ptr<const T>(0), c.ptr<const T>(1), c.ptr<const int32_t>(2),
         c.ptr<G>(3), d.rows, d.n, d.k, d.groups);
}

// groupedMatmulWeightGrad: a, dC, offsets, dB | rows, n, k, groups, dtype, gradDtype (dB's)
void launch_grouped_weight_grad(const KernelCall& c) {
  const GroupedDims d{c.i32(4), c.i32(5), c.i32(6), c.i32(7), false, true};
  const int dtype = c.i32(8), grad_dtype = c.i32(9);
  if (dtype != kF32 && !c.simt_matmul) {
    grouped_weight_grad_tc(c, d, dtype, grad_dtype);
    return;
  }
  dispatch_float_grad(dtype, grad_dtype, "groupedMatmulWeightGrad", [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    if (weight_grad_big_tiles(d)) launch_weight_grad_cfg<T, G, 2, 2>(c, d);
    else launch_weight_grad_cfg<T, G, 1, 1>(c, d);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("groupedMatmul", launch_grouped_matmul);
KILN_REGISTER_KERNEL("groupedMatmulWeightGrad", launch_grouped_weight_grad);

}  // namespace kiln
