// cross_entropy.cu: fused softmax + cross-entropy over rows, and row softmax.
//   crossEntropyForward   lse[r]    = log sum_j exp(logits[r,j])          (max-subtracted)
//                         losses[r] = lse[r] - logits[r, targets[r]]     (0 when targets[r] < 0)
//   crossEntropyBackward  dLogits[r,j] = lossScale * (exp(logits[r,j] - lse[r]) - [j == targets[r]])
//                         (a zero row when targets[r] < 0); dLogits may alias logits
//   crossEntropyForward with dLogits: both in one block per row (the training loss), the
//                         lse the forward stores feeding the backward's pass: the bits of
//                         the two kernels one after the other
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
// Forward with dLogits: where the row is 16-byte aligned and small enough for two blocks'
// shared memory on an SM (GPT-2's padded 50304 bf16 logits on an H100), each thread
// copies its groups into shared memory by cp.async (the whole row in flight at once) and
// both passes read them there: the logits leave device memory once. Otherwise the second
// pass reads the row again (from L2 when it is still there).
#include <cmath>

#include "kiln_cuda.h"
#include "mma_ptx.h"
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

/**
 * (max, sum exp) of scale * row[0..n), n elements, over the whole block: thread t's groups
 * read by load(g, v), its element of the last partial group from `row`.
 */
template <typename T, typename Load>
__device__ __forceinline__ MaxSum row_max_sum(const T* row, int64_t n, float scale, Load&& load) {
  constexpr int N = Group<T>::N;
  const int64_t full = n / N;
  MaxSum a{neg_inf(), 0.f};
  for (int64_t g = threadIdx.x; g < full; g += kThreads) {
    float v[N];
    load(g, v);
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

/** row_max_sum with the groups read from the row itself, wherever it lies. */
template <typename T>
__device__ __forceinline__ MaxSum row_max_sum(const T* row, int64_t n, float scale) {
  return row_max_sum(row, n, scale, [&](int64_t g, float(&v)[Group<T>::N]) { load_group_anywhere(row + g * Group<T>::N, v); });
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

/**
 * Thread t's share of a row's dLogits from its lse l: its groups (read by load(g, v)) and its
 * element of the last partial group (read from `row`); a zero row for an ignored target.
 * Each element is read and written by one thread, so drow may be row.
 */
template <typename T, typename Load>
__device__ __forceinline__ void write_row_gradient(const T* row, T* drow, int64_t vocab, int32_t t, float l, float loss_scale, Load&& load) {
  constexpr int N = Group<T>::N;
  const bool ignored = t < 0;
  const bool store_aligned = is_aligned16(drow);
  const int64_t full = vocab / N;
  for (int64_t g = threadIdx.x; g < full; g += kThreads) {
    float v[N];
    if (ignored) {
#pragma unroll
      for (int k = 0; k < N; k++) v[k] = 0.f;
    } else {
      load(g, v);
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
__global__ void __launch_bounds__(kThreads) ce_backward_kernel(const T* logits, const int32_t* targets, const float* lse, T* dlogits, int64_t vocab, float loss_scale) {
  constexpr int N = Group<T>::N;
  const int64_t r = blockIdx.x;
  const T* row = logits + r * vocab;
  write_row_gradient(row, dlogits + r * vocab, vocab, targets[r], lse[r], loss_scale, [&](int64_t g, float(&v)[N]) { load_group_anywhere(row + g * N, v); });
}

/**
 * crossEntropyForward with dLogits: ce_forward_kernel's (max, sum) and ce_backward_kernel's
 * write over one row, thread t taking the same groups in both (CACHED: read from the copy
 * thread t made of them in shared memory; each thread reads only its own copies).
 */
template <typename T, bool CACHED>
__global__ void __launch_bounds__(kThreads) ce_forward_backward_kernel(const T* logits, const int32_t* targets, float* losses, float* lse, T* dlogits,
                                                                       int64_t vocab, float loss_scale) {
  constexpr int N = Group<T>::N;
  KILN_DYNAMIC_SHARED(T, cached);
  const int64_t r = blockIdx.x;
  const T* row = logits + r * vocab;
  const int32_t t = targets[r];
  const bool ignored = t < 0;
  const int64_t full = vocab / N;
  // The target's logit, read before the block's first barrier: no thread writes the row before it (dLogits may alias logits).
  const float xt = threadIdx.x == 0 && !ignored && t < vocab ? to_f32(row[t]) : 0.f;
  if constexpr (CACHED) {
    for (int64_t g = threadIdx.x; g < full; g += kThreads) ptx::cp_async_16(cached + g * N, row + g * N, 16u);
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
  }
  auto load = [&](int64_t g, float(&v)[N]) {
    if constexpr (CACHED) load_group(cached + g * N, true, v);
    else load_group_anywhere(row + g * N, v);
  };
  // ce_forward_kernel's (max, sum): the same reduction, its groups read where they were copied.
  const MaxSum a = row_max_sum(row, vocab, 1.f, load);
  const float l = a.m + logf(a.s);
  if (threadIdx.x == 0) {
    lse[r] = l;
    losses[r] = ignored ? 0.f : (t < vocab ? l - xt : __int_as_float(0x7fc00000));
  }
  write_row_gradient(row, dlogits + r * vocab, vocab, t, l, loss_scale, load);
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

/**
 * Whether the forward with dLogits keeps a row in shared memory: rows 16-byte aligned (so
 * every group of every row), and the row's copy small enough that two blocks fit on an SM
 * (one block's load then overlaps the other's arithmetic); the opt-in limit stands for an
 * SM's shared memory less the 1 KiB each block reserves.
 */
template <typename T>
bool cache_rows(const KernelCall& c, const void* logits, int64_t vocab) {
  const size_t bytes = static_cast<size_t>(vocab) * sizeof(T);
  return is_aligned16(logits) && bytes % 16 == 0 && 2 * (bytes + 1024) <= c.shared_per_block + 1024;
}

// crossEntropyForward: logits, targets, losses, lse, dLogits | rows, vocab, dtype, lossScale
void launch_ce_forward(const KernelCall& c) {
  const int64_t rows = c.i64(5), vocab = c.i64(6);
  const float loss_scale = c.f32(8);
  dispatch_float(c.i32(7), "crossEntropyForward", [&](auto tag) {
    using T = decltype(tag);
    T* dlogits = c.ptr<T>(4);
    if (!dlogits) {
      launch("crossEntropyForward", ce_forward_kernel<T>, static_cast<unsigned>(rows), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<const int32_t>(1),
             c.ptr<float>(2), c.ptr<float>(3), vocab);
    } else if (cache_rows<T>(c, c.ptr<const void>(0), vocab)) {
      const size_t smem = static_cast<size_t>(vocab) * sizeof(T);
      allow_shared(ce_forward_backward_kernel<T, true>, smem);
      launch("crossEntropyForward", ce_forward_backward_kernel<T, true>, static_cast<unsigned>(rows), kThreads, smem, c.stream, c.ptr<const T>(0),
             c.ptr<const int32_t>(1), c.ptr<float>(2), c.ptr<float>(3), dlogits, vocab, loss_scale);
    } else {
      launch("crossEntropyForward", ce_forward_backward_kernel<T, false>, static_cast<unsigned>(rows), kThreads, 0, c.stream, c.ptr<const T>(0),
             c.ptr<const int32_t>(1), c.ptr<float>(2), c.ptr<float>(3), dlogits, vocab, loss_scale);
    }
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
