// moe_tokens.cu: moving token rows between token order and expert (slot) order.
// T tokens, top k, rows of `dim`; slots (T, k) i32, a permutation of 0..T*k-1 (the
// assignment (t, j) sits at row slots[t, j] of the (T*k, dim) expert-ordered buffer);
// scale (T, k) optional (absent: 1). All row-major, contiguous, storage dtype.
//   moeDispatch:         out[slots[t, j], :] = scale[t, j] * x[t, :]
//   moeCombine:          out[t, :] = (accumulate ? out[t, :] : 0) + sum_j scale[t, j] * x[slots[t, j], :]
//                        (f32, j in order, starting from the old value)
//   moeCombineScaleGrad: dScale[t, j] = sum_d dOut[t, d] * x[slots[t, j], d]
// Dispatch and combine: grid-stride loops over (row, 16-byte group) when rows are whole
// 16-byte groups and the buffers 16-byte aligned, else over single elements; each
// output element has one writer. ScaleGrad: a warp per (t, j), lane partial sums in a
// fixed column order, then a butterfly.
#include "block_scan.h"
#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

/** Elements moved together: a 16-byte group, or one element. */
template <typename T, bool kVec>
constexpr int unit_elements() {
  return kVec ? Group<T>::N : 1;
}

template <typename T, bool kVec>
__device__ __forceinline__ void load_unit(const T* p, float (&v)[unit_elements<T, kVec>()]) {
  if constexpr (kVec) load_group(p, true, v);
  else v[0] = to_f32(p[0]);
}

template <typename T, bool kVec>
__device__ __forceinline__ void store_unit(T* p, const float (&v)[unit_elements<T, kVec>()]) {
  if constexpr (kVec) store_group(p, true, v);
  else p[0] = from_f32<T>(v[0]);
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) dispatch_kernel(const T* x, const int32_t* slots, const T* scale, T* out, int64_t assignments, int k, int64_t dim) {
  constexpr int N = unit_elements<T, kVec>();
  const int64_t units = dim / N, total = assignments * units;
  for (int64_t u = blockIdx.x * int64_t{kThreads} + threadIdx.x; u < total; u += int64_t{gridDim.x} * kThreads) {
    const int64_t i = u / units, col = (u - i * units) * N;
    float v[N];
    load_unit<T, kVec>(x + (i / k) * dim + col, v);
    if (scale != nullptr) {
      const float w = to_f32(scale[i]);
#pragma unroll
      for (int q = 0; q < N; q++) v[q] *= w;
    }
    store_unit<T, kVec>(out + static_cast<int64_t>(slots[i]) * dim + col, v);
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) combine_kernel(const T* x, const int32_t* slots, const T* scale, T* out, int64_t tokens, int k, int64_t dim, bool accumulate) {
  constexpr int N = unit_elements<T, kVec>();
  const int64_t units = dim / N, total = tokens * units;
  for (int64_t u = blockIdx.x * int64_t{kThreads} + threadIdx.x; u < total; u += int64_t{gridDim.x} * kThreads) {
    const int64_t t = u / units, col = (u - t * units) * N;
    T* dst = out + t * dim + col;
    float acc[N];
    if (accumulate) {
      load_unit<T, kVec>(dst, acc);
    } else {
#pragma unroll
      for (int q = 0; q < N; q++) acc[q] = 0.f;
    }
    for (int j = 0; j < k; j++) {
      const int64_t i = t * k + j;
      const float w = scale != nullptr ? to_f32(scale[i]) : 1.f;
      float v[N];
      load_unit<T, kVec>(x + static_cast<int64_t>(slots[i]) * dim + col, v);
#pragma unroll
      for (int q = 0; q < N; q++) acc[q] += w * v[q];
    }
    store_unit<T, kVec>(dst, acc);
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) combine_scale_grad_kernel(const T* d_out, const T* x, const int32_t* slots, T* d_scale, int64_t assignments, int k, int64_t dim) {
  constexpr int N = unit_elements<T, kVec>();
  const int lane = threadIdx.x & 31;
  const int64_t i = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  if (i >= assignments) return;
  const T* a = d_out + (i / k) * dim;
  const T* b = x + static_cast<int64_t>(slots[i]) * dim;
  float s = 0.f;
  for (int64_t col = int64_t{lane} * N; col < dim; col += 32 * N) {
    float va[N], vb[N];
    load_unit<T, kVec>(a + col, va);
    load_unit<T, kVec>(b + col, vb);
#pragma unroll
    for (int q = 0; q < N; q++) s += va[q] * vb[q];
  }
  s = warp_sum_f32(s);
  if (lane == 0) d_scale[i] = from_f32<T>(s);
}

/** Whole 16-byte groups per row and every row pointer 16-byte aligned. */
template <typename T>
bool rows_vectorizable(int64_t dim, const void* a, const void* b) {
  return (dim * static_cast<int64_t>(sizeof(T))) % 16 == 0 && is_aligned16(a) && is_aligned16(b);
}

// moeDispatch: x, slots, scale, out | tokens, topK, dim, dtype
void launch_moe_dispatch(const KernelCall& c) {
  const int64_t tokens = c.i64(4), dim = c.i64(6);
  const int k = c.i32(5);
  dispatch_float(c.i32(7), "moeDispatch", [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.ptr<const T>(0);
    const int32_t* slots = c.ptr<const int32_t>(1);
    const T* scale = c.ptr<const T>(2);
    T* out = c.ptr<T>(3);
    const int64_t assignments = tokens * k;
    if (rows_vectorizable<T>(dim, x, out)) {
      launch("moeDispatch", dispatch_kernel<T, true>, grid_stride_blocks(assignments * (dim / Group<T>::N), kThreads), kThreads, 0, c.stream, x, slots, scale, out, assignments, k, dim);
    } else {
      launch("moeDispatch", dispatch_kernel<T, false>, grid_stride_blocks(assignments * dim, kThreads), kThreads, 0, c.stream, x, slots, scale, out, assignments, k, dim);
    }
  });
}

// moeCombine: x, slots, scale, out | tokens, topK, dim, accumulate, dtype
void launch_moe_combine(const KernelCall& c) {
  const int64_t tokens = c.i64(4), dim = c.i64(6);
  const int k = c.i32(5);
  const bool accumulate = c.flag(7);
  dispatch_float(c.i32(8), "moeCombine", [&](auto tag) {
    using T = decltype(tag);
    const T* x = c.ptr<const T>(0);
    const int32_t* slots = c.ptr<const int32_t>(1);
    const T* scale = c.ptr<const T>(2);
    T* out = c.ptr<T>(3);
    if (rows_vectorizable<T>(dim, x, out)) {
      launch("moeCombine", combine_kernel<T, true>, grid_stride_blocks(tokens * (dim / Group<T>::N), kThreads), kThreads, 0, c.stream, x, slots, scale, out, tokens, k, dim, accumulate);
    } else {
      launch("moeCombine", combine_kernel<T, false>, grid_stride_blocks(tokens * dim, kThreads), kThreads, 0, c.stream, x, slots, scale, out, tokens, k, dim, accumulate);
    }
  });
}

// moeCombineScaleGrad: dOut, x, slots, dScale | tokens, topK, dim, dtype
void launch_moe_combine_scale_grad(const KernelCall& c) {
  const int64_t tokens = c.i64(4), dim = c.i64(6);
  const int k = c.i32(5);
  dispatch_float(c.i32(7), "moeCombineScaleGrad", [&](auto tag) {
    using T = decltype(tag);
    const T* d_out = c.ptr<const T>(0);
    const T* x = c.ptr<const T>(1);
    const int32_t* slots = c.ptr<const int32_t>(2);
    T* d_scale = c.ptr<T>(3);
    const int64_t assignments = tokens * k;
    const unsigned blocks = ceil_div(assignments, kWarps);
    if (rows_vectorizable<T>(dim, d_out, x)) {
      launch("moeCombineScaleGrad", combine_scale_grad_kernel<T, true>, blocks, kThreads, 0, c.stream, d_out, x, slots, d_scale, assignments, k, dim);
    } else {
      launch("moeCombineScaleGrad", combine_scale_grad_kernel<T, false>, blocks, kThreads, 0, c.stream, d_out, x, slots, d_scale, assignments, k, dim);
    }
  });
}

}  // namespace

KILN_REGISTER_KERNEL("moeDispatch", launch_moe_dispatch);
KILN_REGISTER_KERNEL("moeCombine", launch_moe_combine);
KILN_REGISTER_KERNEL("moeCombineScaleGrad", launch_moe_combine_scale_grad);

}  // namespace kiln
