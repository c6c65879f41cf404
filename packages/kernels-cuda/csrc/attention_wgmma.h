// attention_wgmma.h: what the wgmma attention kernels share (attention_forward_wgmma.cu,
// attention_backward_wgmma.cu): blocks of NWG warpgroups (each owning 64 rows), tiles in
// shared memory as matmul_pipeline::Sw128Tile (wgmma's 128-byte swizzle: blocks of 64
// columns, rows of 128 bytes), their cp.async copies, descriptor steps, and an
// accumulator fragment turned into a register A operand.
//
// Descriptor steps over a tile of Tile's layout (SBO 1024: the next 8 rows; LBO the next
// block of 64 columns):
//   K-major (the tile's columns are the product's k axis, as Q and K in S = Q K^T):
//     16-deep step kk at block kk / 4, + 32 (kk % 4) bytes within its 128-byte rows
//   MN-major (its rows are the k axis, as V in O = P V): step kc at + 2048 kc bytes (16 rows)
// An accumulator fragment (wgmma and mma.sync alike: thread (w, lane) holds rows
// 16 w + lane / 4 (+ 8), columns 8 j + 2 (lane % 4) (+ 1)) rounded to T is, two 8-column
// groups at a time, the A fragment of a 16-deep step: P, dS and their transposes go from
// one product into the next without shared memory.
#pragma once
#include "attention_mma.h"
#include "matmul_pipeline.h"
#include "wgmma_ptx.h"

namespace kiln {
namespace {

using matmul_pipeline::Sw128Tile;

/**
 * Warpgroups per block: 1 (the default: blocks of 64 rows, several independent blocks per
 * SM) or 2 (128 rows sharing each loop tile, KILN_ATTENTION_WGMMA_ROWS=128).
 */
inline int wgmma_attention_warpgroups(const KernelCall& c) { return c.wgmma_attention_rows == 128 ? 2 : 1; }

/** rows x DP of `src` (rows `stride` apart) into the Sw128Tile `dst` by cp.async (NT threads): rows past `valid`, columns past `d` (a multiple of 8) zero. */
template <typename T, typename Tile, int ROWS, int DP, int NT>
__device__ __forceinline__ void copy_sw128(T* dst, const T* src, int64_t stride, int valid, int d) {
  constexpr int CH = DP / 8;
  for (int i = threadIdx.x; i < ROWS * CH; i += NT) {
    const int r = i / CH, c = i % CH;
    const bool inside = r < valid && c * 8 < d;
    ptx::cp_async_16(dst + Tile::offset(r, c), inside ? src + r * stride + c * 8 : src, inside ? 16u : 0u);
  }
}

/**
 * Key tile kt (KEYS rows of K, then of V; rows past the sequence zero) into buffer kt % 2
 * of `kv`: K at 2 (kt % 2) Tile::kElems, V after it. kb, vb: the batch item's first key
 * row of this kv head.
 */
template <typename T, typename Tile, int KEYS, int DP, int NT>
__device__ __forceinline__ void copy_key_tile(T* kv, const T* kb, const T* vb, int64_t kv_stride, int64_t v_stride, int kt, int seq, int d, int dv) {
  const int kv0 = kt * KEYS, nk = min(KEYS, seq - kv0);
  T* buf = kv + (kt & 1) * 2 * Tile::kElems;
  copy_sw128<T, Tile, KEYS, DP, NT>(buf, kb + int64_t{kv0} * kv_stride, kv_stride, nk, d);
  copy_sw128<T, Tile, KEYS, DP, NT>(buf + Tile::kElems, vb + int64_t{kv0} * v_stride, v_stride, nk, dv);
}

/**
 * Commits this thread's copies since the last commit as a group, waits until every group
 * but that newest one has landed, orders them before wgmma's reads (async proxy) and meets
 * the block: the tiles of the current loop step are everyone's, the next step's may still
 * be in flight.
 */
__device__ __forceinline__ void commit_and_land_all_but_newest() {
  ptx::cp_async_commit();
  ptx::cp_async_wait<1>();
  ptx::fence_proxy_async();
  __syncthreads();
}

/** Descriptor of a tile of Tile's layout at `p` (the same for K-major and MN-major reads), or of warpgroup g's 64 rows of it at `p + g 64 64`. */
template <typename Tile, typename T>
__device__ __forceinline__ uint64_t tile_descriptor(const T* p) {
  return ptx::wgmma_desc_sw128(p, Tile::kBlockBytes, 1024);
}

/** Descriptor start units (16 bytes) of the K-major 16-deep step kk in a tile of Tile's layout. */
template <typename Tile>
__device__ __forceinline__ uint64_t k_major_step(int kk) {
  return static_cast<uint64_t>((kk / 4) * Tile::kBlockBytes + (kk % 4) * 32) >> 4;
}

/** Descriptor start units of the MN-major 16-deep step kc (16 rows of 128 bytes). */
__device__ __forceinline__ uint64_t mn_major_step(int kc) { return static_cast<uint64_t>(kc * 2048) >> 4; }

/** The A fragment of the 16-deep step kc from a 64 x (8 N) accumulator fragment, rounded to T. */
template <typename T, int R>
__device__ __forceinline__ void accumulator_as_a(uint32_t (&a)[4], const float (&acc)[R], int kc) {
  const float* x = acc + 8 * kc;  // 8-column groups 2 kc and 2 kc + 1
  a[0] = pack2<T>(x[0], x[1]);
  a[1] = pack2<T>(x[2], x[3]);
  a[2] = pack2<T>(x[4], x[5]);
  a[3] = pack2<T>(x[6], x[7]);
}

/** The 1024-byte aligned start of dynamic shared memory (the kernels ask for 1024 bytes more). */
template <typename T>
__device__ __forceinline__ T* aligned_shared(unsigned char* raw) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
}

/** acc (N / 2 f32) = 0, ordered before the wgmma that will accumulate into it. */
template <int R>
__device__ __forceinline__ void zero_for_wgmma(float (&acc)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) acc[i] = 0.0f;
  ptx::accumulator_fence(acc);
}

/** Commits this warpgroup's wgmma issued since the last commit and waits for them all (acc: an accumulator they write). */
template <int R>
__device__ __forceinline__ void wgmma_commit_and_wait(float (&acc)[R]) {
  ptx::wgmma_commit();
  ptx::accumulator_fence(acc);
  ptx::wgmma_wait<0>();
  ptx::accumulator_fence(acc);
}

/**
 * The two score products of a backward step, waited for: s = A1 B1^T and dp = A2 B2^T
 * (64 x N each, over DP), every operand K-major: a1, a2 this warpgroup's own rows (layout
 * OwnTile), b1, b2 the loop tile's (LoopTile): S = Q K^T and dP = dO V^T, or their transposes.
 */
template <typename T, int DP, typename OwnTile, typename LoopTile, int R>
__device__ __forceinline__ void score_products(float (&s)[R], float (&dp)[R], uint64_t a1, uint64_t b1, uint64_t a2, uint64_t b2) {
  zero_for_wgmma(s);
  zero_for_wgmma(dp);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < DP / 16; kk++) {
    ptx::wgmma_m64k16<T, 2 * R, false, false>(s, a1 + k_major_step<OwnTile>(kk), b1 + k_major_step<LoopTile>(kk));
    ptx::wgmma_m64k16<T, 2 * R, false, false>(dp, a2 + k_major_step<OwnTile>(kk), b2 + k_major_step<LoopTile>(kk));
  }
  ptx::accumulator_fence(s);
  wgmma_commit_and_wait(dp);
  ptx::accumulator_fence(s);
}

/** The register A fragments (accumulator_as_a) of all KC 16-column blocks of an accumulator tile. */
template <typename T, int KC, int R>
__device__ __forceinline__ void accumulator_tile_as_a(uint32_t (&a)[KC][4], const float (&acc)[R]) {
#pragma unroll
  for (int kc = 0; kc < KC; kc++) accumulator_as_a<T>(a[kc], acc, kc);
}

/**
 * acc (64 x N) += A B over KC steps of 16: A from registers (a, this thread's fragments),
 * B MN-major in shared memory at descriptor b. Fences first (acc was touched and a written
 * since the last fence); issued, not committed: release_operands(a) once it is waited for.
 */
template <typename T, int KC, int R>
__device__ __forceinline__ void register_a_products(float (&acc)[R], const uint32_t (&a)[KC][4], uint64_t b) {
  ptx::accumulator_fence(acc);
  ptx::wgmma_fence();
#pragma unroll
  for (int kc = 0; kc < KC; kc++) ptx::wgmma_m64k16_ra<T, 2 * R, true>(acc, a[kc], b + mn_major_step(kc));
}

/** Keeps register A fragments alive up to here (after the wait for the wgmma that read them). */
template <int KC>
__device__ __forceinline__ void release_operands(uint32_t (&a)[KC][4]) {
#pragma unroll
  for (int kc = 0; kc < KC; kc++) ptx::operand_fence(a[kc]);
}

}  // namespace
}  // namespace kiln
