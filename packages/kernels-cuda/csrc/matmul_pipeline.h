// matmul_pipeline.h: what the two pipelined 16-bit matmul kernels share (matmul_mma.cu,
// mma.sync on sm_80+; matmul_wgmma.cu, wgmma on sm_90a): the stored-tile layouts in
// shared memory, each thread's cp.async copies of a tile, and the store of two
// neighbouring outputs in the epilogue. A tile is the operand's rows as stored (row-
// major, leading dimension a multiple of 8 elements), cut into 16-byte chunks of 8.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kiln_cuda.h"
#include "matmul_params.h"
#include "mma_ptx.h"

namespace kiln {
namespace matmul_pipeline {

/**
 * ROWS rows x CHUNKS chunks, row after row, XOR-swizzled for ldmatrix: chunk c of row
 * r at chunk r CHUNKS + (c ^ s(r)), s(r) = r & 7 for rows of 8 or more chunks and
 * (r >> 1) & 3 for rows of 4 (the 8 rows one ldmatrix phase reads fall in 8 bank groups).
 */
template <int ROWS, int CHUNKS>
struct SwizzledTile {
  static_assert(CHUNKS == 4 || CHUNKS % 8 == 0, "rows of 4 chunks, or of a multiple of 8");
  static constexpr int kElems = ROWS * CHUNKS * 8;
  static constexpr int kRowElems = CHUNKS * 8;  // element distance of row r + 1 from row r, same chunk
  __device__ __forceinline__ static int offset(int r, int c) {
    const int s = CHUNKS >= 8 ? (r & 7) : ((r >> 1) & 3);
    return (r * CHUNKS + (c ^ s)) * 8;
  }
};

/**
 * ROWS rows x CHUNKS chunks in wgmma's 128-byte-swizzle atoms: the tile's columns in
 * blocks of 8 chunks (128 bytes), each block ROWS rows of 128 bytes, block after block;
 * chunk c of row r at chunk ((c / 8) ROWS + r) 8 + ((c % 8) ^ (r % 8)). On a 1024-byte
 * aligned base that is the hardware's 128-byte swizzle (address bits 4-6 ^= bits 7-9)
 * of the unswizzled layout, so a descriptor with SBO 1024 (8 rows) and LBO ROWS x 128
 * (the next block of columns) describes it (sim/wgmma_sim.h).
 */
template <int ROWS, int CHUNKS>
struct Sw128Tile {
  static_assert(CHUNKS % 8 == 0 && ROWS % 8 == 0, "whole 8-row x 128-byte atoms");
  static constexpr int kElems = ROWS * CHUNKS * 8;
  static constexpr int kRowElems = 64;
  static constexpr int kBlockBytes = ROWS * 128;  // one block of 8 chunks' columns
  __device__ __forceinline__ static int offset(int r, int c) { return (((c >> 3) * ROWS + r) * 8 + ((c & 7) ^ (r & 7))) * 8; }
};

/**
 * One thread's share of the cp.async copies of a stored tile (layout Tile, ROWS x
 * CHUNKS chunks) of the row-major R x C matrix at `base` (leading dimension ld >= C, a
 * multiple of 8, so a chunk never straddles two rows; a chunk that runs past column C,
 * where ld > C, copies its columns inside and zero fills the rest). Chunk l of the thread is chunk
 * tid % CHUNKS of tile row tid / CHUNKS + l ROW_STEP. Set up once per output tile at
 * step 0 (tile rows from r0, columns from c0); K_ROWS: the k axis runs along the rows
 * (a step moves the tile BK rows down), else along the columns (BK columns right). A
 * chunk outside the matrix copies nothing from `base` (src-size 0: zero fill).
 */
template <typename T, typename Tile, int ROWS, int CHUNKS, int NT, int BK, bool K_ROWS>
struct TileLoader {
  static constexpr int PER = ROWS * CHUNKS / NT, ROW_STEP = NT / CHUNKS;
  static_assert(NT % CHUNKS == 0 && ROWS % ROW_STEP == 0, "the tile's chunks divide among the threads");
  static_assert(ROW_STEP % 8 == 0, "a thread's chunks share one swizzle");
  const T* base;
  const T* src;  // chunk 0 at step 0 (may lie outside the matrix; read only when inside)
  int64_t ld;
  int row, col, R, C, dst;  // chunk 0's matrix coordinates at step 0; its element offset in a stage

  __device__ __forceinline__ TileLoader(const T* base_, int R_, int C_, int64_t ld_, int r0, int c0, int tid) : base(base_), ld(ld_), R(R_), C(C_) {
    const int r = tid / CHUNKS, c = tid % CHUNKS;
    row = r0 + r;
    col = c0 + c * 8;
    src = base + int64_t{row} * ld + col;
    dst = Tile::offset(r, c);
  }

  /** Copies step kt's tile into `stage`. */
  __device__ __forceinline__ void issue(T* stage, int kt) const {
    const int dr = K_ROWS ? kt * BK : 0, dc = K_ROWS ? 0 : kt * BK;
    const T* p = src + (K_ROWS ? int64_t{dr} * ld : int64_t{dc});
    const int cols_in = C - (col + dc);  // of the chunk's 8 columns, those inside the matrix
    const unsigned bytes = cols_in >= 8 ? 16u : cols_in > 0 ? static_cast<unsigned>(cols_in * sizeof(T)) : 0u;
#pragma unroll
    for (int l = 0; l < PER; l++) {
      const bool inside = bytes > 0 && row + dr + l * ROW_STEP < R;
      ptx::cp_async_16(stage + dst + l * ROW_STEP * Tile::kRowElems, inside ? p : base, inside ? bytes : 0u);
      p += ROW_STEP * ld;
    }
  }
};

/**
 * One thread's copies of a k step's A tile then B tile into a stage of the ring (Cfg: the
 * kernel's tile configuration, TileA/TileB, their rows and chunks, NT threads, BK), for
 * the output tile at (m0, n0): A stored (k, m) when TA else (m, k), its rows lda apart,
 * B stored (n, k) when TB else (k, n), densely.
 */
template <typename T, typename Cfg, bool TA, bool TB>
struct StageLoader {
  TileLoader<T, typename Cfg::TileA, Cfg::A_ROWS, Cfg::A_CHUNKS, Cfg::NT, Cfg::BK, TA> a;
  TileLoader<T, typename Cfg::TileB, Cfg::B_ROWS, Cfg::B_CHUNKS, Cfg::NT, Cfg::BK, !TB> b;

  __device__ __forceinline__ StageLoader(const T* A, int64_t lda, const T* B, int m, int n, int k, int m0, int n0, int tid)
      : a(A, TA ? k : m, TA ? m : k, lda, TA ? 0 : m0, TA ? m0 : 0, tid), b(B, TB ? n : k, TB ? k : n, TB ? k : n, TB ? n0 : 0, TB ? 0 : n0, tid) {}

  /** Copies step kt's tiles into `stage` (A first, B after A's kElems). */
  __device__ __forceinline__ void issue(T* stage, int kt) const {
    a.issue(stage, kt);
    b.issue(stage + Cfg::TileA::kElems, kt);
  }
};

template <typename TC>
struct alignas(2 * sizeof(TC)) OutPair {
  TC v[2];
};

/**
 * Output (row, col) and (row, col + 1) from two f32 accumulators: v = alpha acc + bias,
 * plus the old C with accumulate, rounded once to TC. col < n; col + 1 may be n.
 * vec_c: n, the batch stride and C's base allow a 2-element store (then col + 1 < n).
 */
template <typename T, typename TC>
__device__ __forceinline__ void store_pair(const MatmulParams<T, TC>& p, TC* C, int row, int col, float acc0, float acc1, float bias0, float bias1, bool vec_c) {
  TC* out = C + int64_t{row} * p.n + col;
  float v0 = p.alpha * acc0 + bias0;
  float v1 = p.alpha * acc1 + bias1;
  if (vec_c) {
    OutPair<TC>* pair = reinterpret_cast<OutPair<TC>*>(out);
    if (p.accumulate) {
      const OutPair<TC> old = *pair;
      v0 += to_f32(old.v[0]);
      v1 += to_f32(old.v[1]);
    }
    OutPair<TC> w;
    w.v[0] = from_f32<TC>(v0);
    w.v[1] = from_f32<TC>(v1);
    *pair = w;
  } else {
    if (p.accumulate) v0 += to_f32(out[0]);
    out[0] = from_f32<TC>(v0);
    if (col + 1 < p.n) {
      if (p.accumulate) v1 += to_f32(out[1]);
      out[1] = from_f32<TC>(v1);
    }
  }
}

/** vec_c of store_pair for a call. */
template <typename T, typename TC>
inline bool pair_stores(const MatmulParams<T, TC>& p) {
  return p.n % 2 == 0 && p.stride_c % 2 == 0 && reinterpret_cast<uintptr_t>(p.c) % (2 * sizeof(TC)) == 0;
}

/**
 * Launches a pipelined kernel(p, vec_c) with Cfg's tiles: BN-wide column tiles along x,
 * BM-high row tiles along y and batch items along z (each capped at 65535: the kernels
 * stride over the rest), NT threads, SMEM_BYTES of dynamic shared memory.
 */
template <typename Cfg, typename Kernel, typename T, typename TC>
void launch_tiles(Kernel kernel, const MatmulParams<T, TC>& p, cudaStream_t stream) {
  const int64_t mt = (p.m + Cfg::BM - 1) / Cfg::BM;
  const dim3 grid(ceil_div(p.n, Cfg::BN), static_cast<unsigned>(mt < 65535 ? mt : 65535), static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  allow_shared(kernel, Cfg::SMEM_BYTES);
  launch("matmul", kernel, grid, dim3(Cfg::NT), Cfg::SMEM_BYTES, stream, p, pair_stores(p));
}

/** 16-byte copies of every chunk: a 16-byte aligned base, leading dimension and batch stride multiples of 8 elements. */
template <typename T>
inline bool copies16(const T* base, int64_t ld, int64_t stride) {
  return is_aligned16(base) && ld % 8 == 0 && stride % 8 == 0;
}

/**
 * The entry of a pipelined kernel: launch(bool_constant<transA>, bool_constant<transB>)
 * when both operands allow 16-byte copies, else false with nothing launched.
 */
template <typename T, typename TC, typename F>
inline bool launch_if_copies16(const MatmulParams<T, TC>& p, F&& launch) {
  if (!copies16(p.a, p.lda, p.stride_a) || !copies16(p.b, p.trans_b ? p.k : p.n, p.stride_b)) return false;
  if (p.trans_a) {
    if (p.trans_b) launch(std::true_type{}, std::true_type{});
    else launch(std::true_type{}, std::false_type{});
  } else {
    if (p.trans_b) launch(std::false_type{}, std::true_type{});
    else launch(std::false_type{}, std::false_type{});
  }
  return true;
}

}  // namespace matmul_pipeline
}  // namespace kiln

/** The four (operand dtype, C dtype) instances of a pipelined kernel's entry `fn`. */
#define KILN_PIPELINED_MATMUL_INSTANCES(fn)                                                               \
  template bool fn(const MatmulParams<__nv_bfloat16, __nv_bfloat16>&, MatmulTiles, cudaStream_t); \
  template bool fn(const MatmulParams<__nv_bfloat16, float>&, MatmulTiles, cudaStream_t);         \
  template bool fn(const MatmulParams<__half, __half>&, MatmulTiles, cudaStream_t);               \
  template bool fn(const MatmulParams<__half, float>&, MatmulTiles, cudaStream_t)
