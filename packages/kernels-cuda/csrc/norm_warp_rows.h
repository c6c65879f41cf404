// norm_warp_rows.h: LayerNorm / RMSNorm kernels with one warp per row, for rows that are
// whole 16-byte vectors (W = 16 / sizeof(T) values: 8 bf16/f16, 4 f32) with every
// operand 16-byte aligned and at most 32 * V vectors (V <= kWarpRowVecs: 1024 16-bit
// or 512 f32 values). Same formulas as norm.cu's kernels (see there).
//
// Lane l of a row's warp owns the vectors l + 32 k (k < V), each moved by one 16-byte
// load or store; row sums are a warp xor-butterfly (each lane adds its values in order
// first), so no block barrier stands between a row's loads and its stores, and a block's
// 8 warps hold 8 rows at once: many rows in flight per SM, the way a bandwidth-bound
// kernel needs them.
//
// Backward parameter gradients, deterministic: chunk c (block c) covers rows_per_chunk
// rows (a multiple of 8, a function of rows only); warp w takes the chunk's rows
// w, w + 8, ... in order, adding dOut xhat and dOut (and dX as stored, for dXColSums)
// into registers; the 8 warps' sums go through shared memory and are added in warp order
// into the chunk's f32 partial rows, which chunk_partials.h's kernel sums over chunks.
// With a residual, the forward writes x + residual (rounded to T) as it loads the row
// and normalizes that; the backward adds dResidual into dX as it writes it.
// RMSNorm's weightOffset is added to each weight as it is loaded.
#pragma once
#include <type_traits>

#include "block_scan.h"
#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace norm_warp_rows {

constexpr int kVecs = 4;         // 16-byte vectors per lane at most
constexpr int kRowsPerBlock = 8;  // one row per warp
constexpr int kThreads = 32 * kRowsPerBlock;
constexpr int kTargetChunks = 256;  // backward partial rows at most

template <typename T, bool kLayer, int kV>
__global__ void __launch_bounds__(kThreads) forward_kernel(const T* x, const T* w, const T* b, T* out, float* mean_out, float* rstd_out, const T* res,
                                                          T* sum, int64_t rows, int dim, float eps, float weight_offset) {
  const float w_off = kLayer ? -0.0f : weight_offset;  // LayerNorm: x + -0.0f folds away (x + 0.0f would not)
  constexpr int W = Group<T>::N;
  const int lane = threadIdx.x & 31;
  const int nvec = dim / W;
  const float fdim = static_cast<float>(dim);
  for (int64_t row = int64_t{blockIdx.x} * kRowsPerBlock + (threadIdx.x >> 5); row < rows; row += int64_t{gridDim.x} * kRowsPerBlock) {
    const T* xr = x + row * dim;
    T* outr = out + row * dim;
    float v[kV][W];
#pragma unroll
    for (int k = 0; k < kV; k++) {
      const int vi = lane + 32 * k;
      if (vi < nvec) {
        load_group(xr + vi * W, true, v[k]);
        if (res) {
          // The row to normalize: x + residual rounded to T, written to sum as it is used.
          float r[W];
          load_group(res + row * dim + vi * W, true, r);
#pragma unroll
          for (int e = 0; e < W; e++) v[k][e] = to_f32(from_f32<T>(v[k][e] + r[e]));
          store_group(sum + row * dim + vi * W, true, v[k]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < W; e++) v[k][e] = 0.0f;
      }
    }
    float mean = 0.0f;
    if constexpr (kLayer) {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < kV; k++)
#pragma unroll
        for (int e = 0; e < W; e++) s += v[k][e];
      mean = warp_sum_f32(s) / fdim;
    }
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < kV; k++) {
      if (lane + 32 * k < nvec)
#pragma unroll
        for (int e = 0; e < W; e++) {
          const float d = v[k][e] - mean;
          q = fmaf(d, d, q);
        }
    }
    const float rstd = 1.0f / sqrtf(warp_sum_f32(q) / fdim + eps);
#pragma unroll
    for (int k = 0; k < kV; k++) {
      const int vi = lane + 32 * k;
      if (vi < nvec) {
        float wv[W], y[W];
        load_group(w + vi * W, true, wv);
#pragma unroll
        for (int e = 0; e < W; e++) y[e] = (v[k][e] - mean) * rstd * (wv[e] + w_off);
        if (b) {
          float bv[W];
          load_group(b + vi * W, true, bv);
#pragma unroll
          for (int e = 0; e < W; e++) y[e] += bv[e];
        }
        store_group(outr + vi * W, true, y);
      }
    }
    if (lane == 0) {
      if constexpr (kLayer) mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

/** Adds the block's warps' sums acc (each warp's own) in warp order into dst[0, dim), through part. */
template <int kV, int W>
__device__ __forceinline__ void flush_partial(const float (&acc)[kV][W], float* part, float* dst, int nvec, int dim) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int k = 0; k < kV; k++) {
    const int vi = lane + 32 * k;
    if (vi < nvec)
#pragma unroll
      for (int e = 0; e < W; e++) part[warp * dim + vi * W + e] = acc[k][e];
  }
  __syncthreads();
  for (int j = threadIdx.x; j < dim; j += kThreads) {
    float a = 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerBlock; r++) a += part[r * dim + j];
    dst[j] = a;
  }
  __syncthreads();
}

/**
 * Whether the backward with dX's column sums fits rows of `vecs` vectors a lane of
 * `elem`-byte values in registers: 16-bit rows of 4 vectors (769 to 1024 values) would
 * spill a third row of 32 accumulators, and take the block kernels instead.
 */
constexpr bool sums_fit(int vecs, size_t elem) { return !(vecs == kVecs && elem == 2); }

template <typename T, bool kLayer, bool kBias, int kV, bool kSums>
__global__ void __launch_bounds__(kThreads, 2) backward_kernel(const T* dout, const T* x, const T* w, const float* mean, const float* rstd, T* dx,
                                                           const T* dres, float* pw, float* pb, float* px, int64_t rows, int dim,
                                                           float weight_offset, int64_t rows_per_chunk) {
  const float w_off = kLayer ? -0.0f : weight_offset;  // LayerNorm: x + -0.0f folds away (x + 0.0f would not)
  constexpr int W = Group<T>::N;
  KILN_DYNAMIC_SHARED(float, part);  // [kRowsPerBlock][dim]: each warp's parameter-gradient sums
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nvec = dim / W;
  const float fdim = static_cast<float>(dim);
  const int64_t chunk = blockIdx.x;
  const int64_t row0 = chunk * rows_per_chunk;
  const int64_t row_end = row0 + rows_per_chunk < rows ? row0 + rows_per_chunk : rows;
  float aw[kV][W], ab[kV][W], ax[kSums ? kV : 1][W];  // ab unused without a bias
#pragma unroll
  for (int k = 0; k < kV; k++)
#pragma unroll
    for (int e = 0; e < W; e++) {
      aw[k][e] = 0.0f;
      if constexpr (kBias) ab[k][e] = 0.0f;
      if constexpr (kSums) ax[k][e] = 0.0f;
    }
  for (int64_t row = row0 + warp; row < row_end; row += kRowsPerBlock) {
    const int64_t off = row * dim;
    const float m = kLayer ? mean[row] : 0.0f;
    const float rs = rstd[row];
    // x and dOut stay packed in registers between the two passes and are widened in each.
    Group<T> xg[kV], dg[kV];
#pragma unroll
    for (int k = 0; k < kV; k++) {
      const int vi = lane + 32 * k;
      if (vi < nvec) {
        xg[k].raw = *reinterpret_cast<const uint4*>(x + off + vi * W);
        dg[k].raw = *reinterpret_cast<const uint4*>(dout + off + vi * W);
      }
    }
    float sg = 0.0f, sgx = 0.0f;  // sum g, sum g xhat (g = dOut w)
#pragma unroll
    for (int k = 0; k < kV; k++) {
      const int vi = lane + 32 * k;
      if (vi < nvec) {
        float wv[W];
        load_group(w + vi * W, true, wv);
#pragma unroll
        for (int e = 0; e < W; e++) {
          const float g = to_f32(dg[k].e[e]) * (wv[e] + w_off);
          sg += g;
          sgx = fmaf(g, (to_f32(xg[k].e[e]) - m) * rs, sgx);
        }
      }
    }
    const float mg = kLayer ? warp_sum_f32(sg) / fdim : 0.0f;
    const float mgx = warp_sum_f32(sgx) / fdim;
#pragma unroll
    for (int k = 0; k < kV; k++) {
      const int vi = lane + 32 * k;
      if (vi < nvec) {
        float wv[W], out[W];
        load_group(w + vi * W, true, wv);
        // The residual stream's gradient, added as dX is written (dX may alias it: read first).
        if (dres) {
          load_group(dres + off + vi * W, true, out);
        } else {
#pragma unroll
          for (int e = 0; e < W; e++) out[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < W; e++) {
          const float d = to_f32(dg[k].e[e]);
          const float xh = (to_f32(xg[k].e[e]) - m) * rs;
          out[e] += rs * (d * (wv[e] + w_off) - mg - xh * mgx);
          aw[k][e] = fmaf(d, xh, aw[k][e]);
          if constexpr (kBias) ab[k][e] += d;
        }
        store_group(dx + off + vi * W, true, out);
        if constexpr (kSums)
#pragma unroll
          for (int e = 0; e < W; e++) ax[k][e] += to_f32(from_f32<T>(out[e]));  // as stored
      }
    }
  }
  // The chunk's partial rows: the warps' sums added in warp order (dWeight, dBias, dX's column sums).
  flush_partial<kV, W>(aw, part, pw + chunk * dim, nvec, dim);
  if constexpr (kBias) flush_partial<kV, W>(ab, part, pb + chunk * dim, nvec, dim);
  if constexpr (kSums) flush_partial<kV, W>(ax, part, px + chunk * dim, nvec, dim);
}

/** Vectors per lane for rows of `dim` values of `elem` bytes (0: the row does not fit this path). */
inline int vecs_per_lane(int64_t dim, size_t elem) {
  const int64_t w = static_cast<int64_t>(16 / elem);
  if (dim <= 0 || dim % w != 0) return 0;
  const int64_t lanes_vecs = (dim / w + 31) / 32;
  return lanes_vecs <= kVecs ? static_cast<int>(lanes_vecs) : 0;
}

/** Calls f(std::integral_constant<int, v>) for v in 1..kVecs. */
template <typename F>
void with_vecs(int v, F&& f) {
  switch (v) {
    case 1: f(std::integral_constant<int, 1>{}); return;
    case 2: f(std::integral_constant<int, 2>{}); return;
    case 3: f(std::integral_constant<int, 3>{}); return;
    default: f(std::integral_constant<int, 4>{}); return;
  }
}

}  // namespace norm_warp_rows
}  // namespace kiln
