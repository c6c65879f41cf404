// grouped_matmul_tc.cu: groupedMatmul and groupedMatmulWeightGrad for bf16 / f16 on
// tensor cores (nvcuda::wmma 16x16x16 fragments, f32 accumulators; the simulator
// emulates them, sim/wmma_sim.h). Same work split as grouped_matmul.cu:
//   groupedMatmul: grid.x = the groups' row tiles end to end (found by find_group_tile),
//     grid.y = column tiles; op(A) = A_g (rows_g, k), op(B) = B_g (k, n) or (n, k).
//   groupedMatmulWeightGrad: grid (k tiles, n tiles, groups); op(A) = dC_g^T (n, rows_g)
//     from dC_g stored (rows_g, n), op(B) = A_g (rows_g, k); the depth is the group's rows.
// The tile product is the dense matmul's (matmul_tiles_tc.h): block tile BM x BN =
// (16 FM WARPS_M) x (16 FN WARPS_N), depth step 32; warp (wm, wn) owns the 16 FM x 16 FN
// sub-tile at (wm * 16 FM, wn * 16 FN). Operand tiles are copied to shared memory in
// their stored layout (rows padded by 8 elements, zero past the edges) and read as row-
// or column-major fragments; the epilogue goes through a per-warp f32 staging tile.
// Each output element is one warp's fixed sequence of MMAs. dB is in the inputs' dtype
// or in f32 (gradDtype); the staging tile's f32 values are added to it either way.
#include "grouped_matmul_tc.h"
#include "grouped_rows.h"
#include "kiln_cuda.h"
#include "matmul_tiles_tc.h"

namespace kiln {
namespace {

/**
 * C (+)= op(A)[m0 : m0 + BM, :] @ op(B)[:, n0 : n0 + BN], op(A) (m, depth), op(B) (depth, n)
 * stored densely (WmmaTile's product); C row-major (m, n) with leading dimension ldc, in T or f32.
 */
template <typename Tile, typename T, typename TC>
__device__ __forceinline__ void tc_tile(const T* A, bool vec_a, const T* B, bool vec_b, TC* C, int64_t ldc, int m, int n, int depth, int m0, int n0,
                                        bool accumulate, T* sA, T* sB, float* sC) {
  const Tile tile;
  WmmaAccumulator acc[Tile::FRAGS_M][Tile::FRAGS_N];
  tile.product(A, Tile::kTransA ? m : depth, vec_a, B, vec_b, m, n, depth, m0, n0, sA, sB, acc);

  // Epilogue: each fragment through this warp's f32 staging tile.
  using namespace nvcuda;
  float* stage = sC + tile.warp * 16 * kWmmaStageLd;
#pragma unroll
  for (int i = 0; i < Tile::FRAGS_M; i++)
#pragma unroll
    for (int j = 0; j < Tile::FRAGS_N; j++) {
      wmma::store_matrix_sync(stage, acc[i][j], kWmmaStageLd, wmma::mem_row_major);
      __syncwarp();
      const int gi0 = m0 + (tile.wm * Tile::FRAGS_M + i) * 16, gj0 = n0 + (tile.wn * Tile::FRAGS_N + j) * 16;
#pragma unroll 1  // unrolled, ptxas keeps every row's address and value live (twice the registers)
      for (int t = 0; t < 8; t++) {  // lanes 0..15 take row 2t, lanes 16..31 row 2t + 1
        const int e = t * 32 + tile.lane, r = e / 16, cc = e % 16, gi = gi0 + r, gj = gj0 + cc;
        if (gi < m && gj < n) {
          TC* out = C + int64_t{gi} * ldc + gj;
          const float v = stage[r * kWmmaStageLd + cc];
          *out = from_f32<TC>(accumulate ? to_f32(*out) + v : v);
        }
      }
      __syncwarp();  // staging tile free for the next fragment
    }
}

#define KILN_TC_SHARED(Tile)                                   \
  __shared__ __align__(128) T sA[Tile::A_ROWS * Tile::A_LD];   \
  __shared__ __align__(128) T sB[Tile::B_ROWS * Tile::B_LD];   \
  __shared__ __align__(128) float sC[Tile::NW * 16 * kWmmaStageLd]

template <typename T, bool TB, int WARPS_M, int WARPS_N, int FM, int FN>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 1)
    grouped_matmul_tc_kernel(const T* a, const T* b, const int32_t* offsets, T* c, int rows, int n, int k, int groups, bool accumulate, bool vec_a, bool vec_b, int col_tile0) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(KILN_CUDA_SIM)
  using Tile = WmmaTile<T, false, TB, WARPS_M, WARPS_N, FM, FN, int>;
  KILN_TC_SHARED(Tile);
  __shared__ int32_t scratch[36];
  int tile;
  const int g = find_group_tile<Tile::BM>(offsets, groups, rows, static_cast<int>(blockIdx.x), scratch, tile);
  if (g < 0) return;  // past the last tile
  int start, end;
  group_rows(offsets, g, rows, start, end);
  const T* A = a + int64_t{start} * k;
  const T* B = b + int64_t{g} * k * n;
  T* C = c + int64_t{start} * n;
  const int n0 = (col_tile0 + static_cast<int>(blockIdx.y)) * Tile::BN;
  tc_tile<Tile>(A, vec_a, B, vec_b, C, n, end - start, n, k, tile * Tile::BM, n0, accumulate, sA, sB, sC);
#else
  (void)a; (void)b; (void)offsets; (void)c; (void)rows; (void)n; (void)k; (void)groups; (void)accumulate; (void)vec_a; (void)vec_b; (void)col_tile0;
#endif
}

template <typename T, typename G, int WARPS_M, int WARPS_N, int FM, int FN>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 1)
    grouped_weight_grad_tc_kernel(const T* a, const T* dc, const int32_t* offsets, G* db, int rows, int n, int k, bool vec_dc, bool vec_a, int group0, int row_tile0) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(KILN_CUDA_SIM)
  using Tile = WmmaTile<T, true, false, WARPS_M, WARPS_N, FM, FN, int>;
  KILN_TC_SHARED(Tile);
  const int g = group0 + static_cast<int>(blockIdx.z);
  int start, end;
  group_rows(offsets, g, rows, start, end);
  if (end == start) return;  // empty group: dB_g stays as it is
  const T* dC = dc + int64_t{start} * n;
  const T* A = a + int64_t{start} * k;
  G* dB = db + int64_t{g} * n * k;
  const int m0 = (row_tile0 + static_cast<int>(blockIdx.y)) * Tile::BM, n0 = static_cast<int>(blockIdx.x) * Tile::BN;
  tc_tile<Tile>(dC, vec_dc, A, vec_a, dB, k, n, k, end - start, m0, n0, true, sA, sB, sC);
#else
  (void)a; (void)dc; (void)offsets; (void)db; (void)rows; (void)n; (void)k; (void)vec_dc; (void)vec_a; (void)group0; (void)row_tile0;
#endif
}

constexpr int kMaxGridYZ = 65535;

/** 16-byte loads of a 16-bit matrix: base aligned and rows (and so every group's first row) whole 16-byte groups. */
bool vec16(const void* p, int64_t ld) { return is_aligned16(p) && ld % 8 == 0; }

template <typename T, bool TB, int WARPS_M, int WARPS_N, int FM, int FN>
void launch_forward(const KernelCall& c, const GroupedDims& d) {
  constexpr int BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16;
  const T* a = c.ptr<const T>(0);
  const T* b = c.ptr<const T>(1);
  // B_g starts at g*k*n: a multiple of 8 elements whenever its leading dimension is.
  const bool vec_a = vec16(a, d.k), vec_b = vec16(b, TB ? d.k : d.n);
  const int col_tiles = (d.n + BN - 1) / BN;
  for (int t0 = 0; t0 < col_tiles; t0 += kMaxGridYZ) {  // grid.y is at most 65535
    const dim3 grid(static_cast<unsigned>(grouped_row_tiles_bound(d.rows, d.groups, BM)), static_cast<unsigned>(col_tiles - t0 < kMaxGridYZ ? col_tiles - t0 : kMaxGridYZ));
    launch("groupedMatmul", grouped_matmul_tc_kernel<T, TB, WARPS_M, WARPS_N, FM, FN>, grid, dim3(WARPS_M * WARPS_N * 32), 0, c.stream, a, b, c.ptr<const int32_t>(2),
           c.ptr<T>(3), d.rows, d.n, d.k, d.groups, d.accumulate, vec_a, vec_b, t0);
  }
}

template <typename T, bool TB>
void launch_forward_t(const KernelCall& c, const GroupedDims& d) {
  if (grouped_big_tiles(d)) launch_forward<T, TB, 2, 4, 4, 2>(c, d);  // 128 x 128, 8 warps of 64 x 32
  else launch_forward<T, TB, 2, 2, 2, 2>(c, d);                       // 64 x 64, 4 warps of 32 x 32
}

template <typename T, typename G, int WARPS_M, int WARPS_N, int FM, int FN>
void launch_weight_grad(const KernelCall& c, const GroupedDims& d) {
  constexpr int BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16;
  const T* a = c.ptr<const T>(0);
  const T* dc = c.ptr<const T>(1);
  const int row_tiles = (d.n + BM - 1) / BM;
  // grid.y and grid.z are at most 65535
  for (int g0 = 0; g0 < d.groups; g0 += kMaxGridYZ)
    for (int t0 = 0; t0 < row_tiles; t0 += kMaxGridYZ) {
      const dim3 grid(ceil_div(d.k, BN), static_cast<unsigned>(row_tiles - t0 < kMaxGridYZ ? row_tiles - t0 : kMaxGridYZ),
                      static_cast<unsigned>(d.groups - g0 < kMaxGridYZ ? d.groups - g0 : kMaxGridYZ));
      launch("groupedMatmulWeightGrad", grouped_weight_grad_tc_kernel<T, G, WARPS_M, WARPS_N, FM, FN>, grid, dim3(WARPS_M * WARPS_N * 32), 0, c.stream, a, dc,
             c.ptr<const int32_t>(2), c.ptr<G>(3), d.rows, d.n, d.k, vec16(dc, d.n), vec16(a, d.k), g0, t0);
    }
}

}  // namespace

void grouped_matmul_tc(const KernelCall& c, const GroupedDims& d, int dtype) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (d.trans_b) launch_forward_t<T, true>(c, d);
    else launch_forward_t<T, false>(c, d);
  };
  if (dtype == kBF16) run(__nv_bfloat16{});
  else if (dtype == kF16) run(__half{});
  else throw_bad_dtype("groupedMatmul", dtype);
}

void grouped_weight_grad_tc(const KernelCall& c, const GroupedDims& d, int dtype, int grad_dtype) {
  auto run = [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    if (weight_grad_big_tiles(d)) launch_weight_grad<T, G, 2, 4, 4, 2>(c, d);
    else launch_weight_grad<T, G, 2, 2, 2, 2>(c, d);
  };
  const bool wide = grad_dtype != dtype;  // dB in f32
  if (wide && grad_dtype != kF32) throw_bad_dtype("groupedMatmulWeightGrad", grad_dtype);
  if (dtype == kBF16) wide ? run(__nv_bfloat16{}, float{}) : run(__nv_bfloat16{}, __nv_bfloat16{});
  else if (dtype == kF16) wide ? run(__half{}, float{}) : run(__half{}, __half{});
  else throw_bad_dtype("groupedMatmulWeightGrad", dtype);
}

}  // namespace kiln
