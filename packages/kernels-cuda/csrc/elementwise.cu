// elementwise.cu: add (out = a + b), scale (out = alpha * x) and dropout over n elements,
// in f32 / bf16 / f16 storage with f32 arithmetic. When every pointer of a call is
// 16-byte aligned, each thread moves 16 bytes per operand at a time (vector_io.h:
// 4 f32 or 8 bf16/f16), the last n % 8 (or % 4) elements one by one; otherwise one
// by one throughout. The same arithmetic per element either way. out may alias an
// input: each element is read before it is written by the same thread.
#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

/** out = a + b (kScale false) or alpha * a (kScale true); kVec: 16-byte groups, every pointer aligned. */
template <typename T, bool kScale, bool kVec>
__global__ void elementwise_kernel(const T* a, const T* b, T* out, int64_t n, float alpha) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t tail = 0;
  if constexpr (kVec) {
    constexpr int N = Group<T>::N;
    const int64_t groups = n / N;
    for (int64_t g = first; g < groups; g += stride) {
      float x[N], y[N];
      load_group(a + g * N, true, x);
      if constexpr (!kScale) load_group(b + g * N, true, y);
#pragma unroll
      for (int k = 0; k < N; k++) x[k] = kScale ? alpha * x[k] : x[k] + y[k];
      store_group(out + g * N, true, x);
    }
    tail = groups * N;
  }
  for (int64_t i = tail + first; i < n; i += stride) out[i] = from_f32<T>(kScale ? alpha * to_f32(a[i]) : to_f32(a[i]) + to_f32(b[i]));
}

template <bool kScale>
void run(const char* name, const KernelCall& c, const void* a, const void* b, void* out, int64_t n, float alpha, int dtype) {
  const bool vec = is_aligned16(a) && is_aligned16(out) && (kScale || is_aligned16(b));
  dispatch_float(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    const int64_t work = vec ? (n + Group<T>::N - 1) / Group<T>::N : n;
    auto go = [&](auto kernel) {
      launch(name, kernel, grid_stride_blocks(work, kThreads), kThreads, 0, c.stream, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n, alpha);
    };
    if (vec) go(elementwise_kernel<T, kScale, true>);
    else go(elementwise_kernel<T, kScale, false>);
  });
}

// The contract's dropout hash (Wellons' lowbias32), in u32 arithmetic.
__host__ __device__ inline uint32_t dropout_mix(uint32_t z) {
  z ^= z >> 16;
  z *= 0x7feb352du;
  z ^= z >> 15;
  z *= 0x846ca68bu;
  return z ^ (z >> 16);
}

/** out[i] = keep(i) ? x[i] * scale : 0, keep(i) when (mix(i ^ key) >> 8) >= threshold, key = mix(seed). */
template <typename T>
__global__ void dropout_kernel(const T* x, T* out, int64_t n, uint32_t key, uint32_t threshold, float scale) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += stride) {
    const bool keep = (dropout_mix(static_cast<uint32_t>(i) ^ key) >> 8) >= threshold;
    out[i] = from_f32<T>(keep ? to_f32(x[i]) * scale : 0.0f);
  }
}

// dropout: x, out | n, seed, threshold (ceil(p * 2^24)), scale (1 / (1 - p)), dtype
void launch_dropout(const KernelCall& c) {
  const int64_t n = c.i64(2);
  const uint32_t seed = static_cast<uint32_t>(c.at(3)), threshold = static_cast<uint32_t>(c.at(4));
  const float scale = c.f32(5);
  const uint32_t key = dropout_mix(seed);  // once, on the host
  dispatch_float(c.i32(6), "dropout", [&](auto tag) {
    using T = decltype(tag);
    launch("dropout", dropout_kernel<T>, grid_stride_blocks(n, kThreads), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<T>(1), n, key, threshold, scale);
  });
}

// add: a, b, out | n, dtype
void launch_add(const KernelCall& c) { run<false>("add", c, c.ptr<const void>(0), c.ptr<const void>(1), c.ptr<void>(2), c.i64(3), 0.0f, c.i32(4)); }

// scale: x, out | n, alpha, dtype
void launch_scale(const KernelCall& c) { run<true>("scale", c, c.ptr<const void>(0), nullptr, c.ptr<void>(1), c.i64(2), c.f32(3), c.i32(4)); }

}  // namespace

KILN_REGISTER_KERNEL("add", launch_add);
KILN_REGISTER_KERNEL("scale", launch_scale);
KILN_REGISTER_KERNEL("dropout", launch_dropout);

}  // namespace kiln
