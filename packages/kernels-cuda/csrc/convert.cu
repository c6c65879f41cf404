// convert.cu: cast between f32 / bf16 / f16 (round to nearest even; NaN stays NaN,
// overflow goes to infinity), fill (floats and 32/16-bit integers), checkFinite
// (flag[0] = 1 when any element is NaN or infinite; only ever written with 1, so
// concurrent writers agree and the result does not depend on order).
// cast and fill move 8 elements a step as 16-byte vectors (two for f32) when every
// pointer is 16-byte aligned; the last n % 8 elements, or every element otherwise,
// one at a time. The values are the same either way.
#include <cstring>

#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

#define KILN_GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * kThreads)

template <typename S, typename D>
__global__ void cast_kernel(const S* src, D* dst, int64_t n) {
  KILN_GRID_STRIDE(i, n) dst[i] = from_f32<D>(to_f32(src[i]));
}

constexpr int kStep = 8;  // elements a vector step: one 16-byte vector of 16-bit values, two of f32

/** cast of groups of 8 elements: 16-byte loads and stores (both pointers 16-byte aligned). */
template <typename S, typename D>
__global__ void cast_vec_kernel(const S* src, D* dst, int64_t groups) {
  constexpr int NS = Group<S>::N, ND = Group<D>::N;
  KILN_GRID_STRIDE(i, groups) {
    float v[kStep];
#pragma unroll
    for (int g = 0; g < kStep / NS; g++) load_group(src + i * kStep + g * NS, true, *reinterpret_cast<float(*)[NS]>(v + g * NS));
#pragma unroll
    for (int g = 0; g < kStep / ND; g++) store_group(dst + i * kStep + g * ND, true, *reinterpret_cast<const float(*)[ND]>(v + g * ND));
  }
}

template <typename T>
__global__ void fill_kernel(T* out, int64_t n, T value) {
  KILN_GRID_STRIDE(i, n) out[i] = value;
}

/** fill of 16-byte vectors, each holding `value` repeated (out 16-byte aligned). */
__global__ void fill_vec_kernel(uint4* out, int64_t vectors, uint4 value) {
  KILN_GRID_STRIDE(i, vectors) out[i] = value;
}

/** A 16-byte vector of `value` repeated. */
template <typename T>
uint4 repeated(T value) {
  static_assert(16 % sizeof(T) == 0, "16 bytes of whole values");
  uint4 v;
  unsigned char* bytes = reinterpret_cast<unsigned char*>(&v);
  for (size_t at = 0; at < 16; at += sizeof(T)) std::memcpy(bytes + at, &value, sizeof(T));
  return v;
}

/** fill: the aligned whole vectors as such, the rest one element at a time. */
template <typename T>
void run_fill(const KernelCall& c, T* out, int64_t n, T value) {
  constexpr int64_t per = 16 / sizeof(T);
  const int64_t vectors = is_aligned16(out) ? n / per : 0;
  if (vectors > 0) launch("fill", fill_vec_kernel, grid_stride_blocks(vectors, kThreads), kThreads, 0, c.stream, reinterpret_cast<uint4*>(out), vectors, repeated(value));
  const int64_t rest = n - vectors * per;
  if (rest > 0) launch("fill", fill_kernel<T>, grid_stride_blocks(rest, kThreads), kThreads, 0, c.stream, out + vectors * per, rest, value);
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
      const S* src = c.ptr<const S>(0);
      D* dst = c.ptr<D>(1);
      const int64_t groups = is_aligned16(src) && is_aligned16(dst) ? n / kStep : 0;
      if (groups > 0) launch("cast", cast_vec_kernel<S, D>, grid_stride_blocks(groups, kThreads), kThreads, 0, c.stream, src, dst, groups);
      const int64_t rest = n - groups * kStep;
      if (rest > 0) launch("cast", cast_kernel<S, D>, grid_stride_blocks(rest, kThreads), kThreads, 0, c.stream, src + groups * kStep, dst + groups * kStep, rest);
    });
  });
}

// fill: out | n, value, dtype (any dtype: floats, i32, u32, u16)
void launch_fill(const KernelCall& c) {
  int64_t n = c.i64(1);
  double v = c.at(2);
  switch (c.i32(3)) {
    case kI32: run_fill(c, c.ptr<int32_t>(0), n, static_cast<int32_t>(v)); return;
    case kU32: run_fill(c, c.ptr<uint32_t>(0), n, static_cast<uint32_t>(v)); return;
    case kU16: run_fill(c, c.ptr<uint16_t>(0), n, static_cast<uint16_t>(v)); return;
    default:
      dispatch_float(c.i32(3), "fill", [&](auto tag) {
        using T = decltype(tag);
        run_fill(c, c.ptr<T>(0), n, from_f32<T>(static_cast<float>(v)));
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
