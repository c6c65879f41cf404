// broken_kernels.cu: kernels with the bugs the simulator must catch, each next to
// its correct twin. Built by test/simulator-catches-bugs.test.ts with the shim;
// `broken_kernels MODE` runs one and prints its result.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kiln_cuda.h"
#include "matmul_pipeline.h"
#include "mma_ptx.h"
#include "wgmma_ptx.h"
#include "sim/sim_options.h"
#include "sim/wmma_sim.h"

namespace {

constexpr int kThreads = 64;

// Block sum through shared memory; thread 0 reads what every thread wrote.
template <bool kBarrier>
__global__ void block_sum(const float* x, float* out) {
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = x[blockIdx.x * kThreads + threadIdx.x];
  if (kBarrier) __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < kThreads; i++) s += partial[i];
    out[blockIdx.x] = s;
  }
}

// Writes one element past the end of `out` when kOffByOne.
template <bool kOffByOne>
__global__ void copy_all(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n + (kOffByOne ? 1 : 0)) out[i] = x[i < n ? i : 0];  // LINE-OOB
}

__global__ void divergent_barrier(float* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

// Two warps, four tiles of 64 through two shared buffers: tile t + 1 is written into
// the other buffer before tile t is read (each thread reads the other warp's half,
// after a warp exchange). Without the barrier that closes an iteration, a warp that
// runs ahead overwrites the buffer the other warp has still to read: the default
// schedule (warps in step at every exchange) does not show it, warps in turn do.
template <bool kClosingBarrier>
__global__ void double_buffer(const float* x, float* out) {
  __shared__ float buf[2][kThreads];
  const int tid = threadIdx.x;
  buf[0][tid] = x[tid];
  float acc = 0;
  for (int t = 0; t < 4; t++) {
    if (t + 1 < 4) buf[(t + 1) & 1][tid] = x[(t + 1) * kThreads + tid];
    __syncthreads();
    float v = __shfl_xor_sync(0xffffffffu, static_cast<float>(t), 1);
    v += buf[t & 1][(tid + 32) % kThreads];
    acc += __shfl_xor_sync(0xffffffffu, v, 0);
    if (kClosingBarrier) __syncthreads();
  }
  out[tid] = acc;
}

__global__ void warp_reduce(const float* x, float* out) {
  float v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) out[threadIdx.x / 32] = v;
}

// One warp: C = A B (16x16x16, f16) through a fragment stored to shared memory,
// then every lane copies row-major slots of the tile out; without the __syncwarp a
// lane reads elements another lane has not stored yet.
template <bool kSync>
__global__ void wmma_tile(const __half* a, const __half* b, float* out) {
  using namespace nvcuda;
  __shared__ float tile[256];
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
  if (kSync) __syncwarp();
  for (int e = threadIdx.x; e < 256; e += 32) out[e] = tile[e];
}

int run_wmma(bool sync) {
  std::vector<__half> a(256), b(256);
  std::vector<float> out(256, 0.f);
  for (int i = 0; i < 256; i++) {
    a[i] = __float2half(static_cast<float>(i % 5) - 2.f);
    b[i] = __float2half(static_cast<float>(i % 3) - 1.f);
  }
  if (sync) kiln::launch("wmma_tile", wmma_tile<true>, 1, 32, 0, nullptr, a.data(), b.data(), out.data());
  else kiln::launch("wmma_tile", wmma_tile<false>, 1, 32, 0, nullptr, a.data(), b.data(), out.data());
  int wrong = 0;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) {
      float expect = 0;
      for (int q = 0; q < 16; q++) expect += __half2float(a[r * 16 + q]) * __half2float(b[q * 16 + c]);
      if (out[r * 16 + c] != expect) wrong++;
    }
  std::printf("wmma %s: %d of 256 elements wrong\n", sync ? "with __syncwarp" : "without __syncwarp", wrong);
  return 0;
}

// One warp: D (16x8) = A (16x16, row-major) B (16x8, row-major), bf16, through
// cp.async into shared memory, ldmatrix (B with .trans) and one mma.sync m16n8k16.
// Lane i copies chunk i of A (row i / 2, half i % 2) and lanes 0..15 row i of B.
// kWait false: no cp.async.wait_group (the fragments read poison); kBarrier false: no
// __syncthreads after the wait (a lane reads rows another lane's wait landed);
// kSwapped: A's ldmatrix rows given in the wrong order (a1 and a2 trade places).
enum class MmaBug { kNone, kNoWait, kNoBarrier, kSwapped };
template <MmaBug kBug>
__global__ void mma_tile(const __nv_bfloat16* a, const __nv_bfloat16* b, float* out) {
  __shared__ __align__(16) __nv_bfloat16 sa[16 * 16];
  __shared__ __align__(16) __nv_bfloat16 sb[16 * 8];
  const int lane = static_cast<int>(threadIdx.x);
  kiln::ptx::cp_async_16(sa + lane * 8, a + lane * 8, 16);
  if (lane < 16) kiln::ptx::cp_async_16(sb + lane * 8, b + lane * 8, 16);
  kiln::ptx::cp_async_commit();
  if (kBug != MmaBug::kNoWait) kiln::ptx::cp_async_wait<0>();
  if (kBug != MmaBug::kNoBarrier) __syncthreads();
  uint32_t fa[4], fb[2];
  // Matrix lane / 8 of A: rows 8 ((lane / 8) & 1).., columns 8 (lane / 16)..; swapped: the other way round.
  const int row = kBug == MmaBug::kSwapped ? (lane / 16) * 8 + lane % 8 : lane % 16;
  const int col = kBug == MmaBug::kSwapped ? ((lane / 8) & 1) * 8 : (lane / 16) * 8;
  kiln::ptx::ldmatrix_x4(fa, sa + row * 16 + col);
  kiln::ptx::ldmatrix_x2_trans(fb, sb + (lane % 16) * 8);
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  kiln::ptx::mma_m16n8k16<__nv_bfloat16>(d, fa, fb);
  const int g = lane / 4, q = lane % 4;
  out[g * 8 + 2 * q] = d[0];
  out[g * 8 + 2 * q + 1] = d[1];
  out[(g + 8) * 8 + 2 * q] = d[2];
  out[(g + 8) * 8 + 2 * q + 1] = d[3];
}

int run_mma(MmaBug bug) {
  std::vector<__nv_bfloat16> a(256), b(128);
  std::vector<float> out(128, 0.f);
  for (int i = 0; i < 256; i++) a[i] = __float2bfloat16(static_cast<float>(i % 7) - 3.f);
  for (int i = 0; i < 128; i++) b[i] = __float2bfloat16(static_cast<float>(i % 5) - 2.f);
  switch (bug) {
    case MmaBug::kNone: kiln::launch("mma_tile", mma_tile<MmaBug::kNone>, 1, 32, 0, nullptr, a.data(), b.data(), out.data()); break;
    case MmaBug::kNoWait: kiln::launch("mma_tile", mma_tile<MmaBug::kNoWait>, 1, 32, 0, nullptr, a.data(), b.data(), out.data()); break;
    case MmaBug::kNoBarrier: kiln::launch("mma_tile", mma_tile<MmaBug::kNoBarrier>, 1, 32, 0, nullptr, a.data(), b.data(), out.data()); break;
    case MmaBug::kSwapped: kiln::launch("mma_tile", mma_tile<MmaBug::kSwapped>, 1, 32, 0, nullptr, a.data(), b.data(), out.data()); break;
  }
  int wrong = 0, nan = 0;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) {
      float expect = 0;
      for (int q = 0; q < 16; q++) expect += __bfloat162float(a[r * 16 + q]) * __bfloat162float(b[q * 8 + c]);
      if (out[r * 8 + c] != expect) wrong++;
      if (std::isnan(out[r * 8 + c])) nan++;
    }
  const char* what = bug == MmaBug::kNone ? "cp.async, wait, barrier" : bug == MmaBug::kNoWait ? "cp.async without wait" : bug == MmaBug::kNoBarrier ? "cp.async without barrier" : "swapped ldmatrix rows";
  std::printf("mma %s: %d of 128 elements wrong, %d NaN\n", what, wrong, nan);
  return 0;
}

// ldmatrix and mma.sync need the whole warp: a 16-thread block must abort.
int run_mma_half_warp() {
  std::vector<__nv_bfloat16> a(256, __float2bfloat16(1.f)), b(128, __float2bfloat16(1.f));
  std::vector<float> out(128);
  kiln::launch("mma_tile", mma_tile<MmaBug::kNone>, 1, 16, 0, nullptr, a.data(), b.data(), out.data());
  std::printf("a half warp's mma was not caught\n");
  return 0;
}

// One warpgroup: D (64 x 128, f32) = A (64 x 16, stored (m, k)) B (16 x 128, stored
// (k, n)), bf16, through cp.async into 128-byte-swizzled shared memory (A K-major, B
// N-major: matmul_pipeline.h's Sw128Tile) and one wgmma m64n128k16. Thread t copies
// chunk t of A (row t / 2, half t % 2) and chunks t, t + 128 of B (row c / 16, chunk c % 16).
// kNoFence: no fence.proxy.async after the copies land; kNoWait: no wgmma.wait_group
// before the accumulators are read; kOverwrite: A's tile is zeroed after the wgmma is
// issued but before its wait (the hardware may still be reading it); kDivergentDesc:
// the last warp gives another B descriptor.
enum class WgmmaBug { kNone, kNoFence, kNoWait, kOverwrite, kDivergentDesc };
using WgTileA = kiln::matmul_pipeline::Sw128Tile<64, 8>;
using WgTileB = kiln::matmul_pipeline::Sw128Tile<16, 16>;
constexpr size_t kWgmmaSmem = (WgTileA::kElems + WgTileB::kElems) * 2 + 1024;

template <WgmmaBug kBug>
__global__ void wgmma_tile(const __nv_bfloat16* a, const __nv_bfloat16* b, float* out) {
  KILN_DYNAMIC_SHARED(unsigned char, raw);
  auto* sa = reinterpret_cast<__nv_bfloat16*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
  __nv_bfloat16* sb = sa + WgTileA::kElems;
  const int t = static_cast<int>(threadIdx.x);
  kiln::ptx::cp_async_16(sa + WgTileA::offset(t / 2, t % 2), a + t * 8, 16);
  for (int c = t; c < 256; c += 128) kiln::ptx::cp_async_16(sb + WgTileB::offset(c / 16, c % 16), b + c * 8, 16);
  kiln::ptx::cp_async_commit();
  kiln::ptx::cp_async_wait<0>();
  if (kBug != WgmmaBug::kNoFence) kiln::ptx::fence_proxy_async();
  __syncthreads();
  float d[64];
  for (float& x : d) x = 0.f;
  const uint64_t da = kiln::ptx::wgmma_desc_sw128(sa, 64 * 128, 1024);
  const uint64_t db = kiln::ptx::wgmma_desc_sw128(sb, kBug == WgmmaBug::kDivergentDesc && t >= 96 ? 4096 : WgTileB::kBlockBytes, 1024);
  kiln::ptx::wgmma_fence();
  kiln::ptx::wgmma_m64k16<__nv_bfloat16, 128, false, true>(d, da, db);
  kiln::ptx::wgmma_commit();
  if (kBug == WgmmaBug::kOverwrite) {
    for (int e = 0; e < 8; e++) sa[WgTileA::offset(t / 2, t % 2) + e] = __float2bfloat16(0.f);
  }
  if (kBug != WgmmaBug::kNoWait) kiln::ptx::wgmma_wait<0>();
  const int w = t / 32, l = t % 32;
  for (int i = 0; i < 64; i++) out[(16 * w + l / 4 + 8 * ((i / 2) % 2)) * 128 + 8 * (i / 4) + 2 * (l % 4) + i % 2] = d[i];
}

int run_wgmma(WgmmaBug bug, unsigned threads = 128) {
  std::vector<__nv_bfloat16> a(64 * 16), b(16 * 128);
  std::vector<float> out(64 * 128, -1.f);
  for (size_t i = 0; i < a.size(); i++) a[i] = __float2bfloat16(static_cast<float>(i % 7) - 3.f);
  for (size_t i = 0; i < b.size(); i++) b[i] = __float2bfloat16(static_cast<float>(i % 5) - 2.f);
  const dim3 block(threads);
  switch (bug) {
    case WgmmaBug::kNone: kiln::launch("wgmma_tile", wgmma_tile<WgmmaBug::kNone>, 1, block, kWgmmaSmem, nullptr, a.data(), b.data(), out.data()); break;
    case WgmmaBug::kNoFence: kiln::launch("wgmma_tile", wgmma_tile<WgmmaBug::kNoFence>, 1, block, kWgmmaSmem, nullptr, a.data(), b.data(), out.data()); break;
    case WgmmaBug::kNoWait: kiln::launch("wgmma_tile", wgmma_tile<WgmmaBug::kNoWait>, 1, block, kWgmmaSmem, nullptr, a.data(), b.data(), out.data()); break;
    case WgmmaBug::kOverwrite: kiln::launch("wgmma_tile", wgmma_tile<WgmmaBug::kOverwrite>, 1, block, kWgmmaSmem, nullptr, a.data(), b.data(), out.data()); break;
    case WgmmaBug::kDivergentDesc:
      kiln::launch("wgmma_tile", wgmma_tile<WgmmaBug::kDivergentDesc>, 1, block, kWgmmaSmem, nullptr, a.data(), b.data(), out.data());
      break;
  }
  int wrong = 0;
  for (int r = 0; r < 64; r++)
    for (int c = 0; c < 128; c++) {
      float expect = 0;
      for (int q = 0; q < 16; q++) expect += __bfloat162float(a[r * 16 + q]) * __bfloat162float(b[q * 128 + c]);
      if (out[r * 128 + c] != expect) wrong++;
    }
  std::printf("wgmma%s: %d of 8192 elements wrong\n", bug == WgmmaBug::kNone ? "" : bug == WgmmaBug::kOverwrite ? " with its tile overwritten before the wait" : " (bug not caught)", wrong);
  return 0;
}

int run_block_sum(bool barrier) {
  const int blocks = 3;
  std::vector<float> x(blocks * kThreads), out(blocks, 0.f);
  for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i % 7);
  if (barrier) kiln::launch("block_sum", block_sum<true>, blocks, kThreads, 0, nullptr, x.data(), out.data());
  else kiln::launch("block_sum", block_sum<false>, blocks, kThreads, 0, nullptr, x.data(), out.data());
  int wrong = 0;
  for (int b = 0; b < blocks; b++) {
    float expect = 0;
    for (int i = 0; i < kThreads; i++) expect += x[b * kThreads + i];
    if (out[b] != expect) wrong++;
  }
  std::printf("block_sum %s: %d of %d blocks wrong\n", barrier ? "with barrier" : "without barrier", wrong, blocks);
  return 0;
}

int run_copy(bool off_by_one) {
  const int n = 100;
  auto* x = static_cast<float*>(std::malloc(n * sizeof(float)));
  auto* out = static_cast<float*>(std::malloc(n * sizeof(float)));
  for (int i = 0; i < n; i++) x[i] = static_cast<float>(i);
  if (off_by_one) kiln::launch("copy_all", copy_all<true>, 4, 32, 0, nullptr, x, out, n);
  else kiln::launch("copy_all", copy_all<false>, 4, 32, 0, nullptr, x, out, n);
  std::printf("copy %s: out[99] = %g\n", off_by_one ? "off by one" : "in bounds", out[n - 1]);
  std::free(x);
  std::free(out);
  return 0;
}

int run_divergent() {
  std::vector<float> out(64);
  kiln::launch("divergent_barrier", divergent_barrier, 1, 64, 0, nullptr, out.data());
  std::printf("divergent barrier was not caught\n");
  return 0;
}

int run_double_buffer(bool closing_barrier, bool warps_in_turn) {
  kiln_sim::SimOptions opts;
  opts.reverse_threads = warps_in_turn;
  opts.warps_in_turn = warps_in_turn;
  kiln_sim::set_options(opts);
  std::vector<float> x(4 * kThreads), out(kThreads);
  for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i);
  if (closing_barrier) kiln::launch("double_buffer", double_buffer<true>, 1, kThreads, 0, nullptr, x.data(), out.data());
  else kiln::launch("double_buffer", double_buffer<false>, 1, kThreads, 0, nullptr, x.data(), out.data());
  int wrong = 0;
  for (int i = 0; i < kThreads; i++) {
    float expect = 0;
    for (int t = 0; t < 4; t++) expect += static_cast<float>(t) + x[t * kThreads + (i + 32) % kThreads];
    if (out[i] != expect) wrong++;
  }
  std::printf("double buffer %s barrier, %s: %d of %d threads wrong\n", closing_barrier ? "with closing" : "without closing",
              warps_in_turn ? "warps in turn" : "default schedule", wrong, kThreads);
  return 0;
}

int run_warp_reduce() {
  std::vector<float> x(96), out(3);
  for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i);
  kiln::launch("warp_reduce", warp_reduce, 1, 96, 0, nullptr, x.data(), out.data());
  std::printf("warp sums: %g %g %g\n", out[0], out[1], out[2]);
  return 0;
}

}  // namespace

namespace kiln {
[[noreturn]] void throw_bad_dtype(const char*, int) { std::abort(); }
}  // namespace kiln

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!std::strcmp(mode, "sum-barrier")) return run_block_sum(true);
  if (!std::strcmp(mode, "sum-no-barrier")) return run_block_sum(false);
  if (!std::strcmp(mode, "copy")) return run_copy(false);
  if (!std::strcmp(mode, "copy-off-by-one")) return run_copy(true);
  if (!std::strcmp(mode, "divergent")) return run_divergent();
  if (!std::strcmp(mode, "warp-reduce")) return run_warp_reduce();
  if (!std::strcmp(mode, "double-buffer")) return run_double_buffer(true, true);
  if (!std::strcmp(mode, "double-buffer-no-barrier")) return run_double_buffer(false, false);
  if (!std::strcmp(mode, "double-buffer-no-barrier-in-turn")) return run_double_buffer(false, true);
  if (!std::strcmp(mode, "wmma-sync")) return run_wmma(true);
  if (!std::strcmp(mode, "wmma-no-sync")) return run_wmma(false);
  if (!std::strcmp(mode, "mma")) return run_mma(MmaBug::kNone);
  if (!std::strcmp(mode, "mma-no-wait")) return run_mma(MmaBug::kNoWait);
  if (!std::strcmp(mode, "mma-no-barrier")) return run_mma(MmaBug::kNoBarrier);
  if (!std::strcmp(mode, "mma-swapped")) return run_mma(MmaBug::kSwapped);
  if (!std::strcmp(mode, "mma-half-warp")) return run_mma_half_warp();
  if (!std::strcmp(mode, "wgmma")) return run_wgmma(WgmmaBug::kNone);
  if (!std::strcmp(mode, "wgmma-no-fence")) return run_wgmma(WgmmaBug::kNoFence);
  if (!std::strcmp(mode, "wgmma-no-wait")) return run_wgmma(WgmmaBug::kNoWait);
  if (!std::strcmp(mode, "wgmma-overwrite")) return run_wgmma(WgmmaBug::kOverwrite);
  if (!std::strcmp(mode, "wgmma-divergent-desc")) return run_wgmma(WgmmaBug::kDivergentDesc);
  if (!std::strcmp(mode, "wgmma-three-warps")) return run_wgmma(WgmmaBug::kNone, 96);
  std::fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
