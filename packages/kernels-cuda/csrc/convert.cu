// convert.cu: cast between f32 / bf16 / f16 (round to nearest even; NaN stays NaN,
// overflow goes to infinity), fill (floats and 32/16-bit integers), checkFinite
// (flag[0] = 1 when any element is NaN or infinite; only ever written with 1, so
// concurrent writers agree and the result does not depend on order).
#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

#define KILN_GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * kThreads)

template <typename S, typename D>
__global__ void cast_kernel(const S* src, D* dst, int64_t n) {
  KILN_GRID_STRIDE(i, n) dst[i] = from_f32<D>(to_f32(src[i]));
}

template <typename T>
__global__ void fill_kernel(T* out, int64_t n, T value) {
  KILN_GRID_STRIDE(i, n) out[i] = value;
}

__device__ __forceinline__ bool finite_f32(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

template <typename T>
__global__ void check_finite_kernel(const T* x, int* flag, int64_t n) {
  bool bad = false;
  KILN_GRID_STRIDE(i, n) bad |= !finite_f32(to_f32(x[i]));
  if (bad) *flag = 1;
}

// cast: src, dst | n, srcDtype, dstDtype
void launch_cast(const KernelCall& c) {
  int64_t n = c.i64(2);
  dispatch_float(c.i32(3), "cast", [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_float(c.i32(4), "cast", [&](auto dst_tag) {
      using D = decltype(dst_tag);
      launch("cast", cast_kernel<S, D>, grid_stride_blocks(n, kThreads), kThreads, 0, c.stream, c.ptr<const S>(0), c.ptr<D>(1), n);
    });
  });
}

// fill: out | n, value, dtype (any dtype: floats, i32, u32, u16)
void launch_fill(const KernelCall& c) {
  int64_t n = c.i64(1);
  double v = c.at(2);
  unsigned grid = grid_stride_blocks(n, kThreads);
  switch (c.i32(3)) {
    case kI32: launch("fill", fill_kernel<int32_t>, grid, kThreads, 0, c.stream, c.ptr<int32_t>(0), n, static_cast<int32_t>(v)); return;
    case kU32: launch("fill", fill_kernel<uint32_t>, grid, kThreads, 0, c.stream, c.ptr<uint32_t>(0), n, static_cast<uint32_t>(v)); return;
    case kU16: launch("fill", fill_kernel<uint16_t>, grid, kThreads, 0, c.stream, c.ptr<uint16_t>(0), n, static_cast<uint16_t>(v)); return;
    default:
      dispatch_float(c.i32(3), "fill", [&](auto tag) {
        using T = decltype(tag);
        launch("fill", fill_kernel<T>, grid, kThreads, 0, c.stream, c.ptr<T>(0), n, from_f32<T>(static_cast<float>(v)));
      });
  }
}

// checkFinite: x, flag | n, dtype
void launch_check_finite(const KernelCall& c) {
  int64_t n = c.i64(2);
  dispatch_float(c.i32(3), "checkFinite", [&](auto tag) {
    using T = decltype(tag);
    launch("checkFinite", check_finite_kernel<T>, grid_stride_blocks(n, kThreads), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<int>(1), n);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("cast", launch_cast);
KILN_REGISTER_KERNEL("fill", launch_fill);
KILN_REGISTER_KERNEL("checkFinite", launch_check_finite);

}  // namespace kiln
