// block_scan.h: integer prefix sums and a float sum over one thread block, in a
// fixed order of operations (the same result for any schedule of the threads).
// blockDim.x must be a multiple of 32 and at most 1024.
#pragma once
#include "kiln_cuda.h"

namespace kiln {

/** Inclusive prefix sum over the lanes of a warp. */
__device__ __forceinline__ int32_t warp_inclusive_sum(int32_t v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int32_t o = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += o;
  }
  return v;
}

/**
 * Exclusive prefix sum of `v` over the block's threads (in thread order); `total` gets
 * the block's sum. `scratch`: 33 ints of shared memory. Every thread must call it;
 * it ends with a barrier, so `scratch` can be reused at once.
 */
__device__ __forceinline__ int32_t block_exclusive_sum(int32_t v, int32_t* scratch, int32_t& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int32_t incl = warp_inclusive_sum(v);
  if (lane == 31) scratch[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int32_t t = lane < warps ? scratch[lane] : 0;
    const int32_t s = warp_inclusive_sum(t);
    scratch[lane] = s - t;  // the warps before this one
    if (lane == 31) scratch[32] = s;
  }
  __syncthreads();
  const int32_t out = scratch[warp] + incl - v;
  total = scratch[32];
  __syncthreads();
  return out;
}

/** Butterfly sum over a warp: every lane gets the same value. */
__device__ __forceinline__ float warp_sum_f32(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

/** Sum of `v` over the block, valid in every thread. `scratch`: 33 floats of shared memory. Ends with a barrier. */
__device__ __forceinline__ float block_sum_f32(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum_f32(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const float s = warp_sum_f32(lane < warps ? scratch[lane] : 0.f);
    if (lane == 0) scratch[32] = s;
  }
  __syncthreads();
  const float out = scratch[32];
  __syncthreads();
  return out;
}

}  // namespace kiln
