// reduce.cu: whole-buffer reductions into one f32.
//   sum:        out[0] = (accumulate ? out[0] : 0) + sum_i x[i]
//   sumSquares: out[0] = (accumulate ? out[0] : 0) + sum_i x[i]^2
// x: n elements of the storage dtype (f32 / bf16 / f16), contiguous; out: one f32.
//
// Two stages, both in a fixed order, so the result is bit-identical for any block or
// thread schedule (no float atomics):
//   1. reduce_partials_kernel: a grid whose size depends on n only. The buffer is cut
//      into groups of 16 bytes (4 f32 or 8 halves); thread g of the grid takes groups
//      g, g + G, g + 2G, ... and sums them in f32 in index order (one 16-byte load per
//      group when x is 16-byte aligned, scalar loads otherwise: the same order either
//      way). Each block reduces its threads with a fixed shuffle tree and writes one
//      partial to scratch.
//   2. reduce_final_kernel: one block adds the partials in f64 (fixed strided order and
//      a fixed tree), adds the previous value when accumulating and writes out[0].
#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;
constexpr int kFinalThreads = 256;


template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

/** Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0. */
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* warp_sums) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  A r = 0;
  if (warp == 0) {
    r = lane < warps ? warp_sums[lane] : A(0);
    r = warp_sum(r);
  }
  return r;
}

template <typename T, bool kSquares, bool kAligned>
__global__ void __launch_bounds__(kThreads) reduce_partials_kernel(const T* x, int64_t n, float* partials) {
  constexpr int N = Group<T>::N;
  __shared__ float warp_sums[kThreads / 32];
  const int64_t full_groups = n / N;
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t g0 = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  float acc = 0.f;
  for (int64_t g = g0; g < full_groups; g += stride) {
    float v[N];
    load_group(x + g * N, kAligned, v);
#pragma unroll
    for (int k = 0; k < N; k++) acc += kSquares ? v[k] * v[k] : v[k];
  }
  // The last partial group (fewer than N elements) belongs to thread full_groups % stride.
  if (g0 == full_groups % stride) {
    for (int64_t i = full_groups * N; i < n; i++) {
      const float v = to_f32(x[i]);
      acc += kSquares ? v * v : v;
    }
  }
  const float total = block_sum(acc, warp_sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kFinalThreads) reduce_final_kernel(const float* partials, int blocks, float* out, bool accumulate) {
  __shared__ double warp_sums[kFinalThreads / 32];
  double acc = 0.0;
  for (int b = threadIdx.x; b < blocks; b += kFinalThreads) acc += static_cast<double>(partials[b]);
  const double total = block_sum(acc, warp_sums);
  if (threadIdx.x == 0) out[0] = static_cast<float>((accumulate ? static_cast<double>(out[0]) : 0.0) + total);
}

template <bool kSquares>
void launch_reduce(const KernelCall& c, const char* name) {
  const int64_t n = c.i64(2);
  const bool accumulate = c.flag(3);
  float* out = c.ptr<float>(1);
  dispatch_float(c.i32(4), name, [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.ptr<const T>(0);
    const int64_t groups = (n + Group<T>::N - 1) / Group<T>::N;
    int64_t want = (groups + kThreads - 1) / kThreads;
    const unsigned blocks = static_cast<unsigned>(want < 1 ? 1 : (want > kMaxBlocks ? kMaxBlocks : want));
    float* partials = static_cast<float*>(c.scratch(sizeof(float) * kMaxBlocks));
    const bool aligned = is_aligned16(x);
    if (aligned)
      launch(name, reduce_partials_kernel<T, kSquares, true>, blocks, kThreads, 0, c.stream, x, n, partials);
    else
      launch(name, reduce_partials_kernel<T, kSquares, false>, blocks, kThreads, 0, c.stream, x, n, partials);
    launch(name, reduce_final_kernel, 1, kFinalThreads, 0, c.stream, partials, static_cast<int>(blocks), out, accumulate);
  });
}

// sum: x, out | n, accumulate, dtype
void launch_sum(const KernelCall& c) { launch_reduce<false>(c, "sum"); }

// sumSquares: x, out | n, accumulate, dtype
void launch_sum_squares(const KernelCall& c) { launch_reduce<true>(c, "sumSquares"); }

}  // namespace

KILN_REGISTER_KERNEL("sum", launch_sum);
KILN_REGISTER_KERNEL("sumSquares", launch_sum_squares);

}  // namespace kiln
