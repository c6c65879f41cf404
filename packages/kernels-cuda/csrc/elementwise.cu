// elementwise.cu: add (out = a + b) and scale (out = alpha * x) over n elements,
// in f32 / bf16 / f16 storage with f32 arithmetic. out may alias an input: each
// element is read before it is written by the same thread.
#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads)
    out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

template <typename T>
__global__ void scale_kernel(const T* x, T* out, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads)
    out[i] = from_f32<T>(alpha * to_f32(x[i]));
}

// add: a, b, out | n, dtype
void launch_add(const KernelCall& c) {
  int64_t n = c.i64(3);
  dispatch_float(c.i32(4), "add", [&](auto tag) {
    using T = decltype(tag);
    launch("add", add_kernel<T>, grid_stride_blocks(n, kThreads), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<const T>(1), c.ptr<T>(2), n);
  });
}

// scale: x, out | n, alpha, dtype
void launch_scale(const KernelCall& c) {
  int64_t n = c.i64(2);
  dispatch_float(c.i32(4), "scale", [&](auto tag) {
    using T = decltype(tag);
    launch("scale", scale_kernel<T>, grid_stride_blocks(n, kThreads), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<T>(1), n, c.f32(3));
  });
}

}  // namespace

KILN_REGISTER_KERNEL("add", launch_add);
KILN_REGISTER_KERNEL("scale", launch_scale);

}  // namespace kiln
