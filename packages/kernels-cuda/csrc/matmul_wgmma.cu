// matmul_wgmma.cu: the bf16 / f16 dense matmul on Hopper's warpgroup tensor-core
// instruction (wgmma.mma_async, sm_90a; the simulator emulates it, sim/wgmma_sim.h).
// matmul.cu's launch_matmul calls it first for 16-bit operands with
// KILN_MATMUL_PATH=wgmma (an sm_90 device, or the simulator); operands whose layout
// rules out 16-byte copies go on to the other kernels. Opt-in until a GPU has run it;
// then it becomes kiln's default own kernel on sm_90.
//
// Math (matmul.cu's header has the full contract): for each batch item i
//   C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
// A block of 256 threads (2 warpgroups) computes a 128 x BN tile of C in f32 (BN 256
// when there are at least 128 such tiles, else 128): warpgroup g owns rows 64 g..64 g + 63
// and all BN columns, BN / 2 accumulators per thread. k advances BK = 64 at a time; each
// 16-deep quarter is one wgmma m64nBNk16 per warpgroup, in k order: every output element
// is one thread's fixed sequence of operations (no split-k, no atomics), the same for
// any block order. The epilogue is matmul_mma.cu's, from wgmma's fragment layout.
//
// Shared memory (dynamic, rounded up to a 1024-byte boundary): a ring of STAGES = 4
// stages, each the A tile then the B tile of one k step, in their stored layout, as
// matmul_pipeline.h's Sw128Tile (the 128-byte swizzle that wgmma's descriptors name):
//   A: transA ? BK rows (k) x 128 (m), M-major : 128 rows (m) x BK (k), K-major
//   B: transB ? BN rows (n) x BK (k), K-major  : BK rows (k) x BN (n), N-major
// Descriptors (SBO 1024: the next 8 rows; LBO: the next block of 64 columns):
//   K-major operand, quarter q: start + 32 q bytes (within the 128-byte rows)
//   MN-major operand, quarter q: start + 2048 q bytes (16 rows of 128 bytes)
//   warpgroup g's A: 64 g rows down (K-major) or block g of 64 m columns (M-major).
// Pipeline: cp.async.cg copies 16 bytes per thread per chunk (zero fill past the edges),
// one group per k step (empty ones too). Before step t every thread waits until step t's
// group has landed, fences the async proxy (wgmma reads shared memory through it), then
// __syncthreads: everyone's copies of step t are visible, and every warpgroup has
// retired its wgmma of step t - 2. Step t + 2 is issued into that stage (t + 2 = t - 2
// mod 4), step t's four wgmma are issued and committed, and the warpgroup waits until
// at most one group (step t's) is in flight: the products of step t run while the
// next step's copies land and its barrier is reached.
// Smem per block: STAGES * (128 + BN) * BK * 2 bytes + 1024 (193 KiB at BN 256, 129 KiB at 128).
#include <type_traits>

#include "kiln_cuda.h"
#include "matmul_params.h"
#include "matmul_pipeline.h"
#include "mma_ptx.h"
#include "wgmma_ptx.h"

namespace kiln {
namespace {

using matmul_pipeline::store_pair;
using matmul_pipeline::Sw128Tile;
using matmul_pipeline::StageLoader;

template <typename T, bool TA, bool TB, int BN_>
struct WgmmaConfig {
  static constexpr int NT = 256, BM = 128, BN = BN_, BK = 64, STAGES = 4, LOOKAHEAD = 2;
  static constexpr int A_ROWS = TA ? BK : BM, A_CHUNKS = (TA ? BM : BK) / 8;
  static constexpr int B_ROWS = TB ? BN : BK, B_CHUNKS = (TB ? BK : BN) / 8;
  using TileA = Sw128Tile<A_ROWS, A_CHUNKS>;
  using TileB = Sw128Tile<B_ROWS, B_CHUNKS>;
  static constexpr int STAGE_ELEMS = TileA::kElems + TileB::kElems;
  static constexpr int STAGE_BYTES = STAGE_ELEMS * static_cast<int>(sizeof(T));
  static_assert(STAGE_BYTES % 1024 == 0 && TileA::kElems * sizeof(T) % 1024 == 0, "every tile starts on a 1024-byte swizzle atom");
  static constexpr size_t SMEM_BYTES = size_t{STAGES} * STAGE_BYTES + 1024;
  // Byte moves of a descriptor's start per 16-deep quarter of a k step.
  static constexpr int A_QUARTER = TA ? 16 * 128 : 32, B_QUARTER = TB ? 32 : 16 * 128;
};

template <typename T, typename TC, bool TA, bool TB, int BN>
__global__ void __launch_bounds__(256, 1) matmul_wgmma_kernel(MatmulParams<T, TC> p, bool vec_c) {
#if defined(KILN_HAS_WGMMA)
  using Cfg = WgmmaConfig<T, TA, TB, BN>;
  using TileA = typename Cfg::TileA;
  using TileB = typename Cfg::TileB;
  constexpr int BK = Cfg::BK, STAGES = Cfg::STAGES, BM = Cfg::BM, LOOKAHEAD = Cfg::LOOKAHEAD;
  KILN_DYNAMIC_SHARED(unsigned char, smem_raw);
  T* smem = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});

  const int tid = static_cast<int>(threadIdx.x), group = tid / 128, lane = tid % 32, warp = (tid % 128) / 32;
  const int m = p.m, n = p.n, k = p.k, ktiles = (k + BK - 1) / BK;
  const int n0 = static_cast<int>(blockIdx.x) * BN;

  // Descriptors of stage 0, quarter 0; stage s, quarter q adds (s STAGE_BYTES + q QUARTER) >> 4
  // to the start address field (addresses stay below 256 KiB: no carry out of it).
  // Warpgroup g's A: rows 64 g.. (K-major, 64 rows of 64) or the g-th block of 64 m columns (M-major, 64 k rows of 64).
  const T* a0 = smem + group * 64 * 64;
  const uint64_t desc_a0 = ptx::wgmma_desc_sw128(a0, TileA::kBlockBytes, 1024);
  const uint64_t desc_b0 = ptx::wgmma_desc_sw128(smem + TileA::kElems, TileB::kBlockBytes, 1024);

  for (int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.stride_a;
    const T* B = p.b + bz * p.stride_b;
    TC* C = p.c + bz * p.stride_c;
    for (int64_t my = blockIdx.y; my * BM < m; my += gridDim.y) {
      const int m0 = static_cast<int>(my * BM);
      const StageLoader<T, Cfg, TA, TB> loader(A, p.lda, B, m, n, k, m0, n0, tid);
      auto load_step = [&](int kt, int s) { loader.issue(smem + s * Cfg::STAGE_ELEMS, kt); };

      float acc[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; i++) acc[i] = 0.f;

      __syncthreads();  // every thread is done with the ring (the previous tile of this block)
#pragma unroll
      for (int s = 0; s < LOOKAHEAD; s++) {
        if (s < ktiles) load_step(s, s);
        ptx::cp_async_commit();
      }

      for (int kt = 0; kt < ktiles; kt++) {
        ptx::cp_async_wait<LOOKAHEAD - 1>();  // step kt's group has landed (this thread's copies)
        ptx::fence_proxy_async();             // ... ordered before wgmma's reads of them
        __syncthreads();                      // everyone's; step kt - 2's wgmma retired in both warpgroups
        if (kt + LOOKAHEAD < ktiles) load_step(kt + LOOKAHEAD, (kt + LOOKAHEAD) % STAGES);
        ptx::cp_async_commit();

        const uint64_t stage = static_cast<uint64_t>((kt % STAGES) * Cfg::STAGE_BYTES);
        ptx::accumulator_fence(acc);
        ptx::wgmma_fence();
#pragma unroll
        for (int q = 0; q < BK / 16; q++)
          ptx::wgmma_m64k16<T, BN, TA, !TB>(acc, desc_a0 + ((stage + q * Cfg::A_QUARTER) >> 4), desc_b0 + ((stage + q * Cfg::B_QUARTER) >> 4));
        ptx::wgmma_commit();
        ptx::accumulator_fence(acc);
        ptx::wgmma_wait<1>();  // step kt - 1's products are done: its stage may be refilled after the next barrier
      }
      ptx::wgmma_wait<0>();
      ptx::accumulator_fence(acc);
      ptx::cp_async_wait<0>();  // only empty groups are left: nothing in flight past the tile

      // Epilogue: register 4 j + 2 h (+1) of this thread is row 16 warp + lane / 4 + 8 h of
      // the warpgroup's 64, columns 8 j + 2 (lane % 4) (+1).
      const int row0 = m0 + group * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BN / 8; j++) {
        const int col = n0 + j * 8 + 2 * (lane % 4);
        if (col >= n) continue;
        const float bias0 = p.bias ? to_f32(p.bias[col]) : 0.f;
        const float bias1 = p.bias && col + 1 < n ? to_f32(p.bias[col + 1]) : 0.f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int row = row0 + 8 * h;
          if (row < m) store_pair(p, C, row, col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], bias0, bias1, vec_c);
        }
      }
    }
  }
#elif defined(__CUDA_ARCH__)
  // Only the sm_90a build has wgmma; the host never launches this elsewhere.
  (void)p;
  (void)vec_c;
  __trap();
#else
  (void)p;
  (void)vec_c;
#endif
}

template <typename T, typename TC, bool TA, bool TB, int BN>
void launch_wgmma_cfg(const MatmulParams<T, TC>& p, cudaStream_t stream) {
  using Cfg = WgmmaConfig<T, TA, TB, BN>;
  auto* kernel = matmul_wgmma_kernel<T, TC, TA, TB, BN>;
  matmul_pipeline::launch_tiles<Cfg>(kernel, p, stream);
}

template <typename T, typename TC, bool TA, bool TB>
void launch_wgmma_t(const MatmulParams<T, TC>& p, MatmulTiles tiles, cudaStream_t stream) {
  const int64_t tiles256 = int64_t{ceil_div(p.m, 128)} * ceil_div(p.n, 256) * p.batch;
  if (tiles == MatmulTiles::Large || (tiles == MatmulTiles::ByCount && tiles256 >= 128)) launch_wgmma_cfg<T, TC, TA, TB, 256>(p, stream);
  else launch_wgmma_cfg<T, TC, TA, TB, 128>(p, stream);
}

}  // namespace

template <typename T, typename TC>
bool launch_matmul_wgmma(const MatmulParams<T, TC>& p, MatmulTiles tiles, cudaStream_t stream) {
  return matmul_pipeline::launch_if_copies16(p, [&](auto ta, auto tb) { launch_wgmma_t<T, TC, decltype(ta)::value, decltype(tb)::value>(p, tiles, stream); });
}

KILN_PIPELINED_MATMUL_INSTANCES(launch_matmul_wgmma);

}  // namespace kiln
