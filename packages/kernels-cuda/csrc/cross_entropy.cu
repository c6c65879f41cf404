// cross_entropy.cu: fused softmax + cross-entropy over rows, and row softmax.
//   crossEntropyForward   lse[r]    = log sum_j exp(logits[r,j])          (max-subtracted)
//                         losses[r] = lse[r] - logits[r, targets[r]]     (0 when targets[r] < 0)
//   crossEntropyBackward  dLogits[r,j] = lossScale * (exp(logits[r,j] - lse[r]) - [j == targets[r]])
//                         (a zero row when targets[r] < 0); dLogits may alias logits
//   softmaxForward        out[r,j] = exp(x[r,j]/T - m) / sum_j exp(x[r,j]/T - m), m = max_j x[r,j]/T;
//                         out may alias x
// Layout: logits / dLogits / x / out are (rows, vocab) row-major in the storage dtype,
// contiguous rows; targets i32, losses and lse f32, one per row.
//
// One block per row. A row is cut into groups of 16 bytes (4 f32 or 8 halves), counted
// from the row's first element; thread t takes groups t, t + blockDim, ... and then
// (threads 0..N-2) one element of the last partial group. A group is read with one
// 16-byte load when the row happens to be 16-byte aligned, else from the two aligned
// chunks that hold it (load_group_anywhere: rows of an odd vocabulary, 7 in 8 of
// them); written with one 16-byte store when aligned, else element by element. The
// arithmetic and its order are the same either way, so results do not depend on addresses.
// Each thread keeps an online (max, sum of exp(x - max)) pair over its elements, one
// rescale per group; the block combines the pairs with a fixed shuffle tree, then a fixed
// tree over the warps, so the result is bit-identical for any thread/block order.
// In-place: softmax reads the whole row (pass 1) before the block barrier of the
// reduction and each element of pass 2 is read and written by the same thread; the
// backward pass reads and writes each element in the same thread.
#include <cmath>

#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace {

constexpr int kThreads = 512;

/** Running max m and sum s of exp(x - m). */
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ float neg_inf() { return __int_as_float(static_cast<int>(0xff800000u)); }

/** Adds N values to the pair: one rescale to the new max, then the exponentials. */
template <int N>
__device__ __forceinline__ void accumulate_group(MaxSum& a, const float (&v)[N]) {
  float gm = v[0];
#pragma unroll
  for (int k = 1; k < N; k++) gm = fmaxf(gm, v[k]);
  if (gm > a.m) {
    a.s *= __expf(a.m - gm);  // 0 while a.m is -inf (a.s is 0 then too)
    a.m = gm;
  }
  if (a.m != neg_inf()) {
#pragma unroll
    for (int k = 0; k < N; k++) a.s += __expf(v[k] - a.m);
  }
}

/** Combines two pairs; symmetric in its arguments (bit for bit), so a shuffle butterfly agrees on every lane. */
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == neg_inf()) return {m, a.s + b.s};
  const float sa = a.m == neg_inf() ? 0.f : a.s * __expf(a.m - m);
  const float sb = b.m == neg_inf() ? 0.f : b.s * __expf(b.m - m);
  return {m, sa + sb};
}

/** The block's combined pair, returned to every thread (blockDim.x == kThreads). */
__device__ __forceinline__ MaxSum block_combine(MaxSum a) {
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  __shared__ float res_m, res_s;
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) {
    MaxSum o;
    o.m = __shfl_xor_sync(0xffffffffu, a.m, mask);
    o.s = __shfl_xor_sync(0xffffffffu, a.s, mask);
    a = combine(a, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sm[warp] = a.m;
    ss[warp] = a.s;
  }
  __syncthreads();
  if (warp == 0) {
    constexpr int kWarps = kThreads / 32;
    MaxSum b = lane < kWarps ? MaxSum{sm[lane], ss[lane]} : MaxSum{neg_inf(), 0.f};
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) {
      MaxSum o;
      o.m = __shfl_xor_sync(0xffffffffu, b.m, mask);
      o.s = __shfl_xor_sync(0xffffffffu, b.s, mask);
      b = combine(b, o);
    }
    if (lane == 0) {
      res_m = b.m;
      res_s = b.s;
    }
  }
  __syncthreads();
  return {res_m, res_s};
}

/** (max, sum exp) of scale * row[0..n), n elements, over the whole block. */
template <typename T>
__device__ __forceinline__ MaxSum row_max_sum(const T* row, int64_t n, float scale) {
  constexpr int N = Group<T>::N;
  const int64_t full = n / N;
  MaxSum a{neg_inf(), 0.f};
  for (int64_t g = threadIdx.x; g < full; g += kThreads) {
    float v[N];
    load_group_anywhere(row + g * N, v);
#pragma unroll
    for (int k = 0; k < N; k++) v[k] *= scale;
    accumulate_group(a, v);
  }
  const int64_t j = full * N + threadIdx.x;
  if (threadIdx.x < N && j < n) {
    float v[1] = {to_f32(row[j]) * scale};
    accumulate_group(a, v);
  }
  return block_combine(a);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) ce_forward_kernel(const T* logits, const int32_t* targets, float* losses, float* lse, int64_t vocab) {
  const int64_t r = blockIdx.x;
  const T* row = logits + r * vocab;
  const MaxSum a = row_max_sum(row, vocab, 1.f);
  if (threadIdx.x == 0) {
    const float l = a.m + logf(a.s);
    const int32_t t = targets[r];
    lse[r] = l;
    losses[r] = t < 0 ? 0.f : (t < vocab ? l - to_f32(row[t]) : __int_as_float(0x7fc00000));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) ce_backward_kernel(const T* logits, const int32_t* targets, const float* lse, T* dlogits, int64_t vocab, float loss_scale) {
  constexpr int N = Group<T>::N;
  const int64_t r = blockIdx.x;
  const T* row = logits + r * vocab;
  T* drow = dlogits + r * vocab;
  const int32_t t = targets[r];
  const float l = lse[r];
  const bool ignored = t < 0;
  const bool store_aligned = is_aligned16(drow);
  const int64_t full = vocab / N;
  for (int64_t g = threadIdx.x; g < full; g += kThreads) {
    float v[N];
    if (ignored) {
#pragma unroll
      for (int k = 0; k < N; k++) v[k] = 0.f;
    } else {
      load_group_anywhere(row + g * N, v);
#pragma unroll
      for (int k = 0; k < N; k++) v[k] = loss_scale * (__expf(v[k] - l) - (g * N + k == t ? 1.f : 0.f));
    }
    store_group(drow + g * N, store_aligned, v);
  }
  const int64_t j = full * N + threadIdx.x;
  if (threadIdx.x < N && j < vocab)
    drow[j] = from_f32<T>(ignored ? 0.f : loss_scale * (__expf(to_f32(row[j]) - l) - (j == t ? 1.f : 0.f)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) softmax_kernel(const T* x, T* out, int64_t dim, float inv_t) {
  constexpr int N = Group<T>::N;
  const int64_t r = blockIdx.x;
  const T* row = x + r * dim;
  T* orow = out + r * dim;
  // Pass 1 reads the whole row; block_combine's barriers order it before any write below.
  const MaxSum a = row_max_sum(row, dim, inv_t);
  const float inv_s = 1.f / a.s;
  const bool store_aligned = is_aligned16(orow);
  const int64_t full = dim / N;
  for (int64_t g = threadIdx.x; g < full; g += kThreads) {
    float v[N];
    load_group_anywhere(row + g * N, v);
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = __expf(v[k] * inv_t - a.m) * inv_s;
    store_group(orow + g * N, store_aligned, v);
  }
  const int64_t j = full * N + threadIdx.x;
  if (threadIdx.x < N && j < dim) orow[j] = from_f32<T>(__expf(to_f32(row[j]) * inv_t - a.m) * inv_s);
}

// crossEntropyForward: logits, targets, losses, lse | rows, vocab, dtype
void launch_ce_forward(const KernelCall& c) {
  const int64_t rows = c.i64(4), vocab = c.i64(5);
  dispatch_float(c.i32(6), "crossEntropyForward", [&](auto tag) {
    using T = decltype(tag);
    launch("crossEntropyForward", ce_forward_kernel<T>, static_cast<unsigned>(rows), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<const int32_t>(1), c.ptr<float>(2),
           c.ptr<float>(3), vocab);
  });
}

// crossEntropyBackward: logits, targets, lse, dLogits | rows, vocab, lossScale, dtype
void launch_ce_backward(const KernelCall& c) {
  const int64_t rows = c.i64(4), vocab = c.i64(5);
  dispatch_float(c.i32(7), "crossEntropyBackward", [&](auto tag) {
    using T = decltype(tag);
    launch("crossEntropyBackward", ce_backward_kernel<T>, static_cast<unsigned>(rows), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<const int32_t>(1),
           c.ptr<const float>(2), c.ptr<T>(3), vocab, c.f32(6));
  });
}

// softmaxForward: x, out | rows, dim, temperature, dtype
void launch_softmax(const KernelCall& c) {
  const int64_t rows = c.i64(2), dim = c.i64(3);
  const float inv_t = static_cast<float>(1.0 / c.at(4));
  dispatch_float(c.i32(5), "softmaxForward", [&](auto tag) {
    using T = decltype(tag);
    launch("softmaxForward", softmax_kernel<T>, static_cast<unsigned>(rows), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<T>(1), dim, inv_t);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("crossEntropyForward", launch_ce_forward);
KILN_REGISTER_KERNEL("crossEntropyBackward", launch_ce_backward);
KILN_REGISTER_KERNEL("softmaxForward", launch_softmax);

}  // namespace kiln
