// matmul_mma.cu: the bf16 / f16 dense matmul on tensor cores, pipelined (sm_80 and
// newer; the simulator emulates its instructions, sim/mma_sim.h). matmul.cu's
// launch_matmul calls it for 16-bit operands when cuBLASLt did not take the call and
// the SIMT path is not forced; operands whose layout rules out 16-byte copies stay on
// matmul.cu's WMMA kernel.
//
// Math (matmul.cu's header has the full contract): for each batch item i
//   C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
//   op(A)(r, d) = transA ? A[d * m + r] : A[r * k + d]    op(B)(d, j) = transB ? B[j * k + d] : B[d * n + j]
// A block computes a BM x BN tile of C in f32: 128 x 128 with 4 warps (2 x 2, each
// 64 x 64: 4 x 8 mma tiles of 16 x 8, 128 accumulators per lane) when there are at
// least 128 such tiles, else 64 x 64 with 4 warps (2 x 2, each 32 x 32: 2 x 4 tiles).
// k advances BK = 32 at a time; each 16-deep half is one mma.sync.m16n8k16 (bf16/f16
// in, f32 accumulate) per 16 x 8 tile, in k order: every output element is one warp
// lane's fixed sequence of operations (no split-k, no atomics), the same for any
// block or thread order. The epilogue works from the accumulator registers:
// v = alpha * acc + bias[j], plus the old C with accumulate, rounded once to C's
// dtype (T, or f32); pairs of columns are stored together when C allows.
//
// Shared memory (dynamic): a ring of STAGES = 4 stages, each the A tile then the B
// tile of one k step, in their stored layout (rows of 16-bit elements, 16-byte chunks):
//   A: transA ? BK rows (k) x BM (m) : BM rows (m) x BK (k)
//   B: transB ? BN rows (n) x BK (k) : BK rows (k) x BN (n)
// Chunk c of row r sits at chunk r * CHUNKS + (c ^ s(r)), with s(r) = r & 7 for rows of
// 8 or more chunks and (r >> 1) & 3 for rows of 4 (64 bytes): the 8 rows one ldmatrix
// phase reads fall in 8 different 16-byte bank groups, and the copies are whole chunks.
// Fragments come from ldmatrix.x4: row-major stored operands (A (m, k), B (n, k)) load
// as is, the transposed ones (A (k, m), B (k, n)) with .trans, so each lane ends with
// the PTX fragment layout for every transA / transB pair.
// Pipeline: cp.async.cg copies 16 bytes per thread per chunk (src-size 0 past the
// matrix edges: zero fill) and commits one group per k step (empty ones too, so the
// count stays fixed). Before step t every thread waits until at most STAGES - 2 of its
// groups are pending (step t's tile has landed), then __syncthreads (every thread's
// copies are visible, and every warp is done with step t - 1's stage), issues step
// t + STAGES - 1 into that freed stage and computes on step t's: one barrier per step.
// Smem per block: STAGES * (BM + BN) * BK * 2 bytes (64 KiB at 128 x 128, 32 KiB at 64 x 64).
#include <type_traits>

#include "kiln_cuda.h"
#include "matmul_params.h"
#include "matmul_pipeline.h"
#include "mma_ptx.h"

namespace kiln {
namespace {

using matmul_pipeline::store_pair;
using matmul_pipeline::SwizzledTile;
using matmul_pipeline::StageLoader;

constexpr int kMmaBK = 32;
constexpr int kMmaStages = 4;

template <typename T, bool TA, bool TB, int WARPS_M, int WARPS_N, int MI, int NI>
struct MmaConfig {
  static_assert(NI % 2 == 0, "B fragments load two 8-column tiles at a time");
  static constexpr int NT = WARPS_M * WARPS_N * 32, BK = kMmaBK, STAGES = kMmaStages;
  static constexpr int WM = MI * 16, WN = NI * 8, BM = WARPS_M * WM, BN = WARPS_N * WN;
  static constexpr int A_ROWS = TA ? BK : BM, A_CHUNKS = (TA ? BM : BK) / 8;
  static constexpr int B_ROWS = TB ? BN : BK, B_CHUNKS = (TB ? BK : BN) / 8;
  using TileA = SwizzledTile<A_ROWS, A_CHUNKS>;
  using TileB = SwizzledTile<B_ROWS, B_CHUNKS>;
  static constexpr int STAGE_ELEMS = TileA::kElems + TileB::kElems;
  static constexpr size_t SMEM_BYTES = size_t{STAGES} * STAGE_ELEMS * sizeof(T);
};

// An explicit minimum of 1 block per SM: without it ptxas capped one 64 x 64 variant at
// 96 registers on sm_80/86/89 and spilled.
template <typename T, typename TC, bool TA, bool TB, int WARPS_M, int WARPS_N, int MI, int NI>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 1) matmul_mma_kernel(MatmulParams<T, TC> p, bool vec_c) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(KILN_CUDA_SIM)
  using Cfg = MmaConfig<T, TA, TB, WARPS_M, WARPS_N, MI, NI>;
  using TileA = typename Cfg::TileA;
  using TileB = typename Cfg::TileB;
  constexpr int BK = Cfg::BK, STAGES = Cfg::STAGES, BM = Cfg::BM, BN = Cfg::BN, WM = Cfg::WM, WN = Cfg::WN;
  KILN_DYNAMIC_SHARED(T, smem);

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int m = p.m, n = p.n, k = p.k, ktiles = (k + BK - 1) / BK;
  const int n0 = static_cast<int>(blockIdx.x) * BN;
  const int g = lane / 4, q = lane % 4, j8 = lane / 8, r8 = lane % 8;

  // This lane's ldmatrix row in a stage, as element offsets: the lane-dependent part
  // here, the rest a constant per fragment (a move of 16 rows keeps the swizzle).
  //   A stored (m, k): matrix j8 is m rows 8 (j8 & 1).., k columns 8 (j8 >> 1)..: per k half
  //   A stored (k, m) (.trans): k rows 8 (j8 >> 1).., m columns 8 (j8 & 1)..: per m16 tile
  //   B stored (n, k): 8-column tile j + (j8 >> 1), k columns 8 (j8 & 1)..: per k half
  //   B stored (k, n) (.trans): k rows 8 (j8 & 1).., tile j + (j8 >> 1): per pair of tiles
  constexpr int A_KK = 16 * Cfg::A_CHUNKS * 8, A_I = 16 * Cfg::A_CHUNKS * 8;
  constexpr int B_KK = 16 * Cfg::B_CHUNKS * 8, B_J = 16 * Cfg::B_CHUNKS * 8;
  int a_lane[TA ? MI : 2], b_lane[TB ? 2 : NI / 2];
#pragma unroll
  for (int x = 0; x < (TA ? MI : 2); x++)
    a_lane[x] = TA ? TileA::offset((j8 >> 1) * 8 + r8, (wm * WM + x * 16) / 8 + (j8 & 1)) : TileA::offset(wm * WM + lane % 16, 2 * x + lane / 16);
#pragma unroll
  for (int x = 0; x < (TB ? 2 : NI / 2); x++)
    b_lane[x] = TB ? TileB::offset(wn * WN + (j8 >> 1) * 8 + r8, 2 * x + (j8 & 1)) : TileB::offset((j8 & 1) * 8 + r8, (wn * WN + x * 16) / 8 + (j8 >> 1));

  for (int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.stride_a;
    const T* B = p.b + bz * p.stride_b;
    TC* C = p.c + bz * p.stride_c;
    for (int64_t my = blockIdx.y; my * BM < m; my += gridDim.y) {
      const int m0 = static_cast<int>(my * BM);

      // A stored (k, m) or (m, k), B stored (n, k) or (k, n): this thread's copies.
      const StageLoader<T, Cfg, TA, TB> loader(A, p.lda, B, m, n, k, m0, n0, tid);
      auto load_step = [&](int kt, int s) { loader.issue(smem + s * Cfg::STAGE_ELEMS, kt); };

      float acc[MI][NI][4];
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

      __syncthreads();  // every warp is done with the ring (the previous tile of this block)
#pragma unroll
      for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles) load_step(s, s);
        ptx::cp_async_commit();
      }

      for (int kt = 0; kt < ktiles; kt++) {
        ptx::cp_async_wait<STAGES - 2>();  // step kt's group has landed (this thread's copies)
        __syncthreads();                   // everyone's copies; stage (kt - 1) % STAGES is free
        if (kt + STAGES - 1 < ktiles) load_step(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
        ptx::cp_async_commit();

        const T* sa = smem + (kt % STAGES) * Cfg::STAGE_ELEMS;
        const T* sb = sa + TileA::kElems;
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
          uint32_t af[MI][4], bf[NI][2];
#pragma unroll
          for (int i = 0; i < MI; i++) {
            const T* row = sa + a_lane[TA ? i : kk] + (TA ? kk * A_KK : i * A_I);
            if constexpr (TA) ptx::ldmatrix_x4_trans(af[i], row);
            else ptx::ldmatrix_x4(af[i], row);
          }
#pragma unroll
          for (int j = 0; j < NI; j += 2) {  // 8-column tiles j, j + 1: matrix j8 is tile j + (j8 >> 1), k 8 (j8 & 1)..
            uint32_t r4[4];
            const T* row = sb + b_lane[TB ? kk : j / 2] + (TB ? (j / 2) * B_J : kk * B_KK);
            if constexpr (TB) ptx::ldmatrix_x4(r4, row);
            else ptx::ldmatrix_x4_trans(r4, row);
            bf[j][0] = r4[0];
            bf[j][1] = r4[1];
            bf[j + 1][0] = r4[2];
            bf[j + 1][1] = r4[3];
          }
#pragma unroll
          for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NI; j++) ptx::mma_m16n8k16<T>(acc[i][j], af[i], bf[j]);
        }
      }
      ptx::cp_async_wait<0>();  // only empty groups are left: nothing in flight past the tile

      // Epilogue from the registers: lane (g, q) of mma tile (i, j) holds rows g, g + 8
      // and columns 2q, 2q + 1.
#pragma unroll
      for (int j = 0; j < NI; j++) {
        const int col = n0 + wn * WN + j * 8 + 2 * q;
        if (col >= n) continue;
        const bool two = col + 1 < n;
        const float bias0 = p.bias ? to_f32(p.bias[col]) : 0.f;
        const float bias1 = p.bias && two ? to_f32(p.bias[col + 1]) : 0.f;
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int row = m0 + wm * WM + i * 16 + g + 8 * h;
            if (row < m) store_pair(p, C, row, col, acc[i][j][2 * h], acc[i][j][2 * h + 1], bias0, bias1, vec_c);
          }
      }
    }
  }
#else
  (void)p;
  (void)vec_c;
#endif
}

template <typename T, typename TC, bool TA, bool TB, int WARPS_M, int WARPS_N, int MI, int NI>
void launch_mma_cfg(const MatmulParams<T, TC>& p, cudaStream_t stream) {
  using Cfg = MmaConfig<T, TA, TB, WARPS_M, WARPS_N, MI, NI>;
  auto* kernel = matmul_mma_kernel<T, TC, TA, TB, WARPS_M, WARPS_N, MI, NI>;
  matmul_pipeline::launch_tiles<Cfg>(kernel, p, stream);
}

template <typename T, typename TC, bool TA, bool TB>
void launch_mma_t(const MatmulParams<T, TC>& p, MatmulTiles tiles, cudaStream_t stream) {
  const int64_t tiles128 = int64_t{ceil_div(p.m, 128)} * ceil_div(p.n, 128) * p.batch;
  if (tiles == MatmulTiles::Large || (tiles == MatmulTiles::ByCount && tiles128 >= 128)) launch_mma_cfg<T, TC, TA, TB, 2, 2, 4, 8>(p, stream);  // 128 x 128, 4 warps of 64 x 64
  else launch_mma_cfg<T, TC, TA, TB, 2, 2, 2, 4>(p, stream);                  // 64 x 64, 4 warps of 32 x 32
}

}  // namespace

template <typename T, typename TC>
bool launch_matmul_mma(const MatmulParams<T, TC>& p, MatmulTiles tiles, cudaStream_t stream) {
  return matmul_pipeline::launch_if_copies16(p, [&](auto ta, auto tb) { launch_mma_t<T, TC, decltype(ta)::value, decltype(tb)::value>(p, tiles, stream); });
}

KILN_PIPELINED_MATMUL_INSTANCES(launch_matmul_mma);

}  // namespace kiln
