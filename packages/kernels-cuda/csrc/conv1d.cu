// conv1d.cu: conv1dCausalForward and conv1dCausalBackward, Mamba2's short convolution
// (causal, depthwise over channels, K <= 16 taps per channel).
//   x (B, T, C), token rows rs elements apart; weight (C, K); bias, dBias (C);
//   out, dOut, dX (B, T, C) dense; dWeight (C, K); all of the storage dtype, f32 sums
//   (dWeight and dBias in gradDtype: the storage dtype, or f32 with 16-bit inputs).
//   forward:  out[b,t,c] = bias[c] + sum_{j<K} w[c,j] x[b, t-(K-1)+j, c]        (x before t = 0 is 0)
//   backward: dX[b,s,c]   = sum_{j<K, s+(K-1)-j < T} w[c,j] dOut[b, s+(K-1)-j, c]
//             dW[c,j]    += sum_{b,t} dOut[b,t,c] x[b, t-(K-1)+j, c],   dBias[c] += sum_{b,t} dOut[b,t,c]
// out and dX: a grid-stride loop, one thread per (row, channel), channels fastest.
// Parameter gradients (deterministic, no atomics): the B*T rows are cut into chunks
// (a function of the shape only); block (channel tile, chunk) has a thread per
// (channel, tap), which walks the chunk's rows in order (8 row slots per tap, added in
// slot order through shared memory) into one f32 partial per chunk in scratch; a
// second kernel sums each element's partials over chunks in order and adds the sum to
// dWeight / dBias (one rounding to their dtype).
#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxK = 16;          // CONV1D_MAX_KERNEL_SIZE in @kiln/contract
constexpr int kTile = 32;          // channels per parameter-gradient block
constexpr int kSlots = 8;          // row slots per (channel, tap) in a parameter-gradient block
constexpr int kMaxChunks = 256;    // partials per element at most
constexpr int64_t kMinChunkRows = 64;

struct Conv1dDims {
  int64_t rows;  // B*T
  int64_t T, C, rs;
  int K;
};

template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_forward_kernel(const T* x, const T* w, const T* bias, T* out, Conv1dDims d) {
  const int64_t total = d.rows * d.C;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t r = i / d.C, c = i - r * d.C;
    const int64_t t = r % d.T;
    const int j0 = t >= d.K - 1 ? 0 : static_cast<int>(d.K - 1 - t);
    float acc = bias ? to_f32(bias[c]) : 0.0f;
    // tap j reads x at row r - (K-1) + j
    const T* xr = x + (r - (d.K - 1) + j0) * d.rs + c;
    const T* wc = w + c * d.K;
    for (int j = j0; j < d.K; j++) acc = fmaf(to_f32(wc[j]), to_f32(xr[(j - j0) * d.rs]), acc);
    out[i] = from_f32<T>(acc);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_dx_kernel(const T* dout, const T* w, T* dx, Conv1dDims d) {
  const int64_t total = d.rows * d.C;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t r = i / d.C, c = i - r * d.C;
    const int64_t left = d.T - r % d.T;  // rows of this sequence from r on
    const int k0 = left >= d.K ? 0 : static_cast<int>(d.K - left);
    float acc = 0.0f;
    // tap j reads dOut at row r + (K-1) - j
    const T* dr = dout + (r + (d.K - 1) - k0) * d.C + c;
    const T* wc = w + c * d.K;
    for (int j = k0; j < d.K; j++) acc = fmaf(to_f32(wc[j]), to_f32(dr[-(j - k0) * d.C]), acc);
    dx[i] = from_f32<T>(acc);
  }
}

/**
 * Block (blockIdx.x channel tile, blockIdx.y chunk), threads (kTile channels, K taps, kSlots
 * row slots). Writes pw[chunk][c*K + j] and, from tap 0's threads, pb[chunk][c].
 */
template <typename T>
__global__ void __launch_bounds__(kTile* kMaxK) conv1d_param_partial_kernel(const T* dout, const T* x, float* pw, float* pb, Conv1dDims d,
                                                                              int64_t rows_per_chunk) {
  __shared__ float sw[kSlots][kMaxK][kTile];
  __shared__ float sb[kSlots][kTile];
  const int tx = threadIdx.x, j = threadIdx.y;
  const int64_t c = int64_t{blockIdx.x} * kTile + tx;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < d.rows ? r0 + rows_per_chunk : d.rows;
  const bool live = c < d.C;
  for (int slot = 0; slot < kSlots; slot++) {
    float aw = 0.0f, ab = 0.0f;
    if (live) {
      for (int64_t r = r0 + slot; r < r1; r += kSlots) {
        const float g = to_f32(dout[r * d.C + c]);
        if (r % d.T + j >= d.K - 1) aw = fmaf(g, to_f32(x[(r - (d.K - 1) + j) * d.rs + c]), aw);
        ab += g;
      }
    }
    sw[slot][j][tx] = aw;
    if (j == 0) sb[slot][tx] = ab;
  }
  __syncthreads();
  if (!live) return;
  float aw = 0.0f;
#pragma unroll
  for (int s = 0; s < kSlots; s++) aw += sw[s][j][tx];
  pw[chunk * d.C * d.K + c * d.K + j] = aw;
  if (pb && j == 0) {
    float ab = 0.0f;
#pragma unroll
    for (int s = 0; s < kSlots; s++) ab += sb[s][tx];
    pb[chunk * d.C + c] = ab;
  }
}

/** dst[e] += sum_{k < chunks} part[k*n + e], k in order. */
template <typename T>
__global__ void __launch_bounds__(kThreads) conv1d_param_reduce_kernel(const float* part, T* dst, int64_t n, int chunks) {
  for (int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x; e < n; e += int64_t{gridDim.x} * kThreads) {
    float a = 0.0f;
    for (int k = 0; k < chunks; k++) a += part[k * n + e];
    dst[e] = from_f32<T>(to_f32(dst[e]) + a);
  }
}

Conv1dDims dims_of(const KernelCall& c, int first) {
  // batch, seqLen, channels, kernelSize, rowStride
  const int64_t batch = c.i64(first), T = c.i64(first + 1);
  return Conv1dDims{batch * T, T, c.i64(first + 2), c.i64(first + 4), c.i32(first + 3)};
}

// conv1dCausalForward: x, weight, bias, out | batch, seqLen, channels, kernelSize, rowStride, dtype
void launch_conv1d_forward(const KernelCall& c) {
  const Conv1dDims d = dims_of(c, 4);
  dispatch_float(c.i32(9), "conv1dCausalForward", [&](auto tag) {
    using T = decltype(tag);
    launch("conv1dCausalForward", conv1d_forward_kernel<T>, grid_stride_blocks(d.rows * d.C, kThreads), kThreads, 0, c.stream, c.ptr<const T>(0),
           c.ptr<const T>(1), c.ptr<const T>(2), c.ptr<T>(3), d);
  });
}

// conv1dCausalBackward: dOut, x, weight, dX, dWeight, dBias | batch, seqLen, channels, kernelSize, rowStride, dtype, gradDtype
// (dWeight and dBias in gradDtype: dtype, or f32 with 16-bit inputs; dX in dtype)
void launch_conv1d_backward(const KernelCall& c) {
  const char* name = "conv1dCausalBackward";
  const Conv1dDims d = dims_of(c, 6);
  // Chunks of rows: a function of the shape only, so every call sums alike.
  int64_t chunks = (d.rows + kMinChunkRows - 1) / kMinChunkRows;
  if (chunks > kMaxChunks) chunks = kMaxChunks;
  const int64_t rows_per_chunk = (d.rows + chunks - 1) / chunks;
  chunks = (d.rows + rows_per_chunk - 1) / rows_per_chunk;
  dispatch_float_grad(c.i32(11), c.i32(12), name, [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    const T* dout = c.ptr<const T>(0);
    const T* x = c.ptr<const T>(1);
    const T* w = c.ptr<const T>(2);
    G* db = c.ptr<G>(5);
    launch(name, conv1d_dx_kernel<T>, grid_stride_blocks(d.rows * d.C, kThreads), kThreads, 0, c.stream, dout, w, c.ptr<T>(3), d);
    const size_t nw = static_cast<size_t>(d.C) * static_cast<size_t>(d.K);
    const size_t per = nw + (db ? static_cast<size_t>(d.C) : 0);
    float* pw = static_cast<float*>(c.scratch(sizeof(float) * per * static_cast<size_t>(chunks)));
    float* pb = db ? pw + nw * static_cast<size_t>(chunks) : nullptr;
    launch(name, conv1d_param_partial_kernel<T>, dim3(ceil_div(static_cast<size_t>(d.C), kTile), static_cast<unsigned>(chunks)),
           dim3(kTile, static_cast<unsigned>(d.K)), 0, c.stream, dout, x, pw, pb, d, rows_per_chunk);
    launch(name, conv1d_param_reduce_kernel<G>, grid_stride_blocks(static_cast<int64_t>(nw), kThreads), kThreads, 0, c.stream,
           static_cast<const float*>(pw), c.ptr<G>(4), static_cast<int64_t>(nw), static_cast<int>(chunks));
    if (db) {
      launch(name, conv1d_param_reduce_kernel<G>, grid_stride_blocks(d.C, kThreads), kThreads, 0, c.stream, static_cast<const float*>(pb), db, d.C,
             static_cast<int>(chunks));
    }
  });
}

}  // namespace

KILN_REGISTER_KERNEL("conv1dCausalForward", launch_conv1d_forward);
KILN_REGISTER_KERNEL("conv1dCausalBackward", launch_conv1d_backward);

}  // namespace kiln
