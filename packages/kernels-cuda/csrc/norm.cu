// norm.cu: LayerNorm and RMSNorm over the last dimension, forward and backward, in
// f32 / bf16 / f16 storage with f32 arithmetic.
//
// x, out, dOut, dX are (rows, dim) row-major; weight, bias, dWeight, dBias are (dim);
// mean and rstd are f32 (rows).
//   layerNorm forward: mean = sum_j x_j / dim
//                      rstd = 1 / sqrt(sum_j (x_j - mean)^2 / dim + eps)   (two passes)
//                      out_j = (x_j - mean) rstd w_j (+ b_j)
//   rmsNorm forward:   rstd = 1 / sqrt(sum_j x_j^2 / dim + eps);  out_j = x_j rstd w_j
//   rmsNorm's w_j is weight_j + weightOffset (Gemma stores weight - 1), added in f32 where
//   the weight is read; layerNorm's kernels add nothing
//   with a residual, both forwards normalize sum_j = x_j + residual_j rounded to the
//   storage dtype, which they write first (by the thread that later reads it back)
//   backward, xhat_j = (x_j - mean) rstd (mean = 0 for rmsNorm), g_j = dOut_j w_j:
//                      dX_j = dRes_j + rstd (g_j - mean(g) - xhat_j mean(g xhat))   (rmsNorm: no mean(g);
//                      dRes, the residual stream's gradient, 0 when absent; dX may alias it)
//                      dWeight_j += sum_r dOut_rj xhat_rj,  dBias_j += sum_r dOut_rj
//                      dXColSums_j += sum_r dX_rj (dX as stored; when asked for: a bias gradient)
//
// Rows go to groups of tpr threads (tpr a power of two in [32, 512], the smallest
// with tpr * 8 >= dim); a block of max(tpr, 256) threads holds 256 / tpr rows side
// by side. Thread t of a row owns the columns j = t + k tpr (k < vpt) and keeps them
// in registers, so a row is read once: vpt = 8 up to dim 4096, vpt = 16 (tpr 512)
// up to dim 8192 (forward only; the backward reads rows over 4096 again instead);
// longer rows (vpt = 0) are read again from global memory per pass
// (same column ownership).
// Row sums: each thread adds its columns in order, then a warp xor-butterfly (every
// lane ends with the same bits), then the row's warps in index order via shared
// memory. out may alias x: every element is read and written by the same thread,
// and all its reads come first.
//
// Backward parameter gradients (deterministic, no atomics): the rows are split into
// fixed chunks of rows_per_chunk rows (a function of rows and dim only); block c
// walks chunk c's rows in order, each thread adding dOut xhat (and dOut) of its
// columns into registers; the row slots of a block are then added in slot order
// into one f32 partial row per chunk in scratch (partials for dWeight, then for
// dBias, then for dX's column sums). A second kernel (chunk_partials.h), one launch for
// all three, sums the partials of each column over chunks in a fixed order (contiguous
// ranges of at most 8 chunks, then the range sums by a fixed pairwise tree) and adds the
// result to dWeight / dBias (read-modify-write in their dtype: the inputs' dtype, or
// f32 with 16-bit inputs, gradDtype).
//
// Rows of whole 16-byte vectors with aligned operands, up to 1024 16-bit or 512 f32
// values, go to the warp-per-row kernels of norm_warp_rows.h instead (16-byte loads and
// stores, no block barriers between a row's loads and stores); the same partial-row
// reduction finishes their parameter gradients.
#include <type_traits>

#include "chunk_partials.h"
#include "kiln_cuda.h"
#include "norm_warp_rows.h"

namespace kiln {
namespace {

constexpr int kVpt = 8;            // columns per thread held in registers (16 for the longest cached rows)
constexpr int kMaxTpr = 512;       // threads per row (and per block) at most
constexpr int kMinBlock = 256;     // threads per block at least
constexpr int kMaxChunks = 512;    // backward partial rows at most
constexpr size_t kMaxPartialBytes = size_t{64} << 20;

struct Layout {
  int tpr;      // threads per row
  int threads;  // threads per block
  int rpb;      // rows per block
  int vpt;      // columns per thread in registers: 8, 16, or 0 (not cached)
};

Layout layout_for(int64_t dim) {
  int tpr = 32;
  while (tpr < kMaxTpr && int64_t{tpr} * kVpt < dim) tpr *= 2;
  Layout l;
  l.tpr = tpr;
  l.threads = tpr > kMinBlock ? tpr : kMinBlock;
  l.rpb = l.threads / tpr;
  l.vpt = int64_t{tpr} * kVpt >= dim ? kVpt : int64_t{tpr} * 2 * kVpt >= dim ? 2 * kVpt : 0;
  return l;
}

/**
 * Sums each v[n] over the tpr threads of this thread's row; every thread of the row
 * gets the same result. red: shared float[32 * N]. tpr is uniform over the block.
 */
template <int N>
__device__ __forceinline__ void row_sum(float (&v)[N], float* red, int tpr) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int n = 0; n < N; n++) v[n] += __shfl_xor_sync(0xffffffffu, v[n], o);
  }
  if (tpr > 32) {
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
      for (int n = 0; n < N; n++) red[warp * N + n] = v[n];
    }
    __syncthreads();
    const int w0 = (threadIdx.x / tpr) * (tpr >> 5);
    const int nw = tpr >> 5;
#pragma unroll
    for (int n = 0; n < N; n++) {
      float s = 0.0f;
      for (int w = 0; w < nw; w++) s += red[(w0 + w) * N + n];
      v[n] = s;
    }
    __syncthreads();
  }
}

// ---- forward -----------------------------------------------------------------

template <typename T, bool kLayer, int kV>
__global__ void __launch_bounds__(kMaxTpr, 1) norm_forward_kernel(const T* x, const T* w, const T* b, T* out, float* mean_out, float* rstd_out,
                                                               const T* res, T* sum, int64_t rows, int dim, float eps, float weight_offset, int tpr) {
  __shared__ float red[32];
  const float w_off = kLayer ? -0.0f : weight_offset;  // LayerNorm: x + -0.0f folds away (x + 0.0f would not)
  const int rpb = blockDim.x / tpr;
  const int slot = threadIdx.x / tpr;
  const int t = threadIdx.x - slot * tpr;
  const int64_t groups = (rows + rpb - 1) / rpb;
  const float fdim = static_cast<float>(dim);
  for (int64_t grp = blockIdx.x; grp < groups; grp += gridDim.x) {
    const int64_t row = grp * rpb + slot;
    const bool live = row < rows;
    const T* xr = x + (live ? row : 0) * dim;
    T* outr = out + (live ? row : 0) * dim;
    if (res) {
      // The row to normalize is x + residual as stored: write it, then read it as x.
      T* sumr = sum + (live ? row : 0) * dim;
      if (live)
        for (int j = t; j < dim; j += tpr) sumr[j] = from_f32<T>(to_f32(xr[j]) + to_f32(res[row * dim + j]));
      xr = sumr;
    }
    float mean = 0.0f, rstd;
    if constexpr (kV > 0) {
      float v[kV];
#pragma unroll
      for (int k = 0; k < kV; k++) {
        const int j = t + k * tpr;
        v[k] = (live && j < dim) ? to_f32(xr[j]) : 0.0f;
      }
      if constexpr (kLayer) {
        float s[1] = {0.0f};
#pragma unroll
        for (int k = 0; k < kV; k++) s[0] += v[k];
        row_sum<1>(s, red, tpr);
        mean = s[0] / fdim;
      }
      float q[1] = {0.0f};
#pragma unroll
      for (int k = 0; k < kV; k++) {
        const float d = t + k * tpr < dim ? v[k] - mean : 0.0f;
        q[0] = fmaf(d, d, q[0]);
      }
      row_sum<1>(q, red, tpr);
      rstd = 1.0f / sqrtf(q[0] / fdim + eps);
      if (live) {
#pragma unroll
        for (int k = 0; k < kV; k++) {
          const int j = t + k * tpr;
          if (j < dim) {
            float y = (v[k] - mean) * rstd * (to_f32(w[j]) + w_off);
            if (b) y += to_f32(b[j]);
            outr[j] = from_f32<T>(y);
          }
        }
      }
    } else {
      if constexpr (kLayer) {
        float s[1] = {0.0f};
        if (live)
          for (int j = t; j < dim; j += tpr) s[0] += to_f32(xr[j]);
        row_sum<1>(s, red, tpr);
        mean = s[0] / fdim;
      }
      float q[1] = {0.0f};
      if (live)
        for (int j = t; j < dim; j += tpr) {
          const float d = to_f32(xr[j]) - mean;
          q[0] = fmaf(d, d, q[0]);
        }
      row_sum<1>(q, red, tpr);
      rstd = 1.0f / sqrtf(q[0] / fdim + eps);
      if (live)
        for (int j = t; j < dim; j += tpr) {
          float y = (to_f32(xr[j]) - mean) * rstd * (to_f32(w[j]) + w_off);
          if (b) y += to_f32(b[j]);
          outr[j] = from_f32<T>(y);
        }
    }
    if (live && t == 0) {
      if constexpr (kLayer) mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

// ---- backward ----------------------------------------------------------------

template <typename T, bool kLayer, bool kBias, int kV>
__global__ void __launch_bounds__(kMaxTpr, 1) norm_backward_kernel(const T* dout, const T* x, const T* w, const float* mean, const float* rstd, T* dx,
                                                                const T* dres, float* pw, float* pb, float* px, int64_t rows, int dim, float weight_offset,
                                                                int tpr, int64_t rows_per_chunk) {
  const float w_off = kLayer ? -0.0f : weight_offset;  // LayerNorm: x + -0.0f folds away (x + 0.0f would not)
  __shared__ float red[64];
  __shared__ float sw[kMinBlock * kVpt];
  __shared__ float sb[kMinBlock * kVpt];
  __shared__ float sx[kMinBlock * kVpt];
  const int rpb = blockDim.x / tpr;
  const int slot = threadIdx.x / tpr;
  const int t = threadIdx.x - slot * tpr;
  const int64_t chunk = blockIdx.x;
  const int64_t row0 = chunk * rows_per_chunk;
  const int64_t row_end = row0 + rows_per_chunk < rows ? row0 + rows_per_chunk : rows;
  const float fdim = static_cast<float>(dim);
  float* pwr = pw + chunk * dim;
  float* pbr = kBias ? pb + chunk * dim : nullptr;
  float* pxr = px ? px + chunk * dim : nullptr;

  if constexpr (kV > 0) {
    // weight stays in registers across rows when there is room (kV = 8); kV = 16 reads it per row (cached)
    constexpr bool kKeepW = kV <= kVpt;
    float wv[kKeepW ? kV : 1], aw[kV], ab[kV], ax[kV];
#pragma unroll
    for (int k = 0; k < kV; k++) {
      const int j = t + k * tpr;
      if constexpr (kKeepW) wv[k] = j < dim ? to_f32(w[j]) + w_off : 0.0f;
      aw[k] = 0.0f;
      ab[k] = 0.0f;
      ax[k] = 0.0f;
    }
    for (int64_t g0 = row0; g0 < row_end; g0 += rpb) {
      const int64_t row = g0 + slot;
      const bool live = row < row_end;
      const int64_t off = (live ? row : 0) * dim;
      const float m = (kLayer && live) ? mean[row] : 0.0f;
      const float rs = live ? rstd[row] : 0.0f;
      float g[kV], xh[kV];
      float s[2] = {0.0f, 0.0f};
#pragma unroll
      for (int k = 0; k < kV; k++) {
        const int j = t + k * tpr;
        const bool in = live && j < dim;
        const float d = in ? to_f32(dout[off + j]) : 0.0f;
        xh[k] = in ? (to_f32(x[off + j]) - m) * rs : 0.0f;
        float wj;
        if constexpr (kKeepW) wj = wv[k];
        else wj = in ? to_f32(w[j]) + w_off : 0.0f;
        g[k] = d * wj;
        aw[k] = fmaf(d, xh[k], aw[k]);
        if constexpr (kBias) ab[k] += d;
        s[0] += g[k];
        s[1] = fmaf(g[k], xh[k], s[1]);
      }
      row_sum<2>(s, red, tpr);
      if (live) {
        const float mg = kLayer ? s[0] / fdim : 0.0f;
        const float mgx = s[1] / fdim;
#pragma unroll
        for (int k = 0; k < kV; k++) {
          const int j = t + k * tpr;
          if (j < dim) {
            const T v = from_f32<T>(rs * (g[k] - mg - xh[k] * mgx) + (dres ? to_f32(dres[off + j]) : 0.0f));
            dx[off + j] = v;
            ax[k] += to_f32(v);
          }
        }
      }
    }
    if (rpb == 1) {
#pragma unroll
      for (int k = 0; k < kV; k++) {
        const int j = t + k * tpr;
        if (j < dim) {
          pwr[j] = aw[k];
          if constexpr (kBias) pbr[j] = ab[k];
          if (pxr) pxr[j] = ax[k];
        }
      }
    } else {
      // rpb > 1 only with 256-thread blocks and kV = 8: rpb * dim <= 256 * kVpt
#pragma unroll
      for (int k = 0; k < kV; k++) {
        const int j = t + k * tpr;
        if (j < dim) {
          sw[slot * dim + j] = aw[k];
          if constexpr (kBias) sb[slot * dim + j] = ab[k];
          sx[slot * dim + j] = ax[k];
        }
      }
      __syncthreads();
      for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float a = 0.0f, c = 0.0f, e = 0.0f;
        for (int r = 0; r < rpb; r++) {
          a += sw[r * dim + j];
          if constexpr (kBias) c += sb[r * dim + j];
          e += sx[r * dim + j];
        }
        pwr[j] = a;
        if constexpr (kBias) pbr[j] = c;
        if (pxr) pxr[j] = e;
      }
    }
  } else {
    // tpr == blockDim.x (one row per block): the partial row in scratch is this block's alone,
    // and each of its columns is only ever touched by the same thread.
    for (int j = t; j < dim; j += tpr) {
      pwr[j] = 0.0f;
      if constexpr (kBias) pbr[j] = 0.0f;
      if (pxr) pxr[j] = 0.0f;
    }
    for (int64_t row = row0; row < row_end; row++) {
      const int64_t off = row * dim;
      const float m = kLayer ? mean[row] : 0.0f;
      const float rs = rstd[row];
      float s[2] = {0.0f, 0.0f};
      for (int j = t; j < dim; j += tpr) {
        const float g = to_f32(dout[off + j]) * (to_f32(w[j]) + w_off);
        s[0] += g;
        s[1] = fmaf(g, (to_f32(x[off + j]) - m) * rs, s[1]);
      }
      row_sum<2>(s, red, tpr);
      const float mg = kLayer ? s[0] / fdim : 0.0f;
      const float mgx = s[1] / fdim;
      for (int j = t; j < dim; j += tpr) {
        const float d = to_f32(dout[off + j]);
        const float xh = (to_f32(x[off + j]) - m) * rs;
        const float g = d * (to_f32(w[j]) + w_off);
        const T v = from_f32<T>(rs * (g - mg - xh * mgx) + (dres ? to_f32(dres[off + j]) : 0.0f));
        dx[off + j] = v;
        if (pxr) pxr[j] += to_f32(v);
        pwr[j] = fmaf(d, xh, pwr[j]);
        if constexpr (kBias) pbr[j] += d;
      }
    }
  }
}

// ---- launchers -----------------------------------------------------------------

/** The forward on the warp-per-row kernel when the rows and operands fit it; false otherwise. */
template <bool kLayer>
bool warp_rows_forward(const char* name, const KernelCall& c, const void* x, const void* w, const void* b, void* out, float* mean, float* rstd,
                       const void* res, void* sum, int64_t rows, int dim, float eps, float w_off, int dtype) {
  namespace wr = norm_warp_rows;
  bool taken = false;
  dispatch_float(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    const int vecs = wr::vecs_per_lane(dim, sizeof(T));
    if (rows <= 0 || !vecs || !is_aligned16(x) || !is_aligned16(w) || (b && !is_aligned16(b)) || !is_aligned16(out) ||
        (res && (!is_aligned16(res) || !is_aligned16(sum))))
      return;
    const int64_t blocks = (rows + wr::kRowsPerBlock - 1) / wr::kRowsPerBlock;
    const unsigned grid = static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
    wr::with_vecs(vecs, [&](auto v) {
      launch(name, wr::forward_kernel<T, kLayer, decltype(v)::value>, grid, wr::kThreads, 0, c.stream, static_cast<const T*>(x), static_cast<const T*>(w),
             static_cast<const T*>(b), static_cast<T*>(out), mean, rstd, static_cast<const T*>(res), static_cast<T*>(sum), rows, dim, eps, w_off);
    });
    taken = true;
  });
  return taken;
}

template <bool kLayer>
void run_forward(const char* name, const KernelCall& c, const void* x, const void* w, const void* b, void* out, float* mean, float* rstd,
                 const void* res, void* sum, int64_t rows, int dim, float eps, float w_off, int dtype) {
  if (warp_rows_forward<kLayer>(name, c, x, w, b, out, mean, rstd, res, sum, rows, dim, eps, w_off, dtype)) return;
  const Layout l = layout_for(dim);
  const int64_t groups = (rows + l.rpb - 1) / l.rpb;
  const unsigned grid = static_cast<unsigned>(groups < 65535 * 8 ? groups : 65535 * 8);
  dispatch_float(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    auto go = [&](auto kernel) {
      launch(name, kernel, grid, l.threads, 0, c.stream, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b),
             static_cast<T*>(out), mean, rstd, static_cast<const T*>(res), static_cast<T*>(sum), rows, dim, eps, w_off, l.tpr);
    };
    if (l.vpt == kVpt) go(norm_forward_kernel<T, kLayer, kVpt>);
    else if (l.vpt == 2 * kVpt) go(norm_forward_kernel<T, kLayer, 2 * kVpt>);
    else go(norm_forward_kernel<T, kLayer, 0>);
  });
}

template <bool kLayer>
void run_backward(const char* name, const KernelCall& c, const void* dout, const void* x, const void* w, const float* mean, const float* rstd, void* dx,
                  void* dw, void* db, const void* dres, void* dxs, int64_t rows, int dim, float w_off, int dtype, int grad_dtype) {
  namespace wr = norm_warp_rows;
  dispatch_float_grad(dtype, grad_dtype, name, [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    const int vecs = wr::vecs_per_lane(dim, sizeof(T));
    const bool warp_rows = rows > 0 && vecs && is_aligned16(dout) && is_aligned16(x) && is_aligned16(w) && is_aligned16(dx) &&
                           (!dres || is_aligned16(dres)) && (!dxs || wr::sums_fit(vecs, sizeof(T)));
    // Chunks of whole row groups (warps' rows, or a block's rows side by side): a function
    // of (rows, dim) only, so every run splits alike.
    const Layout l = layout_for(dim);
    const int64_t group_rows = warp_rows ? wr::kRowsPerBlock : l.rpb;
    const int64_t groups = (rows + group_rows - 1) / group_rows;
    const size_t partial_rows = 1 + (db ? 1 : 0) + (dxs ? 1 : 0);  // dWeight, dBias, dX's column sums
    const int64_t by_bytes = static_cast<int64_t>(kMaxPartialBytes / (sizeof(float) * partial_rows * static_cast<size_t>(dim)));
    const int64_t max_chunks = warp_rows ? wr::kTargetChunks : kMaxChunks;
    int64_t target = groups < max_chunks ? groups : max_chunks;
    if (target > by_bytes) target = by_bytes;
    if (target < 1) target = 1;
    const int64_t rows_per_chunk = (groups + target - 1) / target * group_rows;
    const int chunks = static_cast<int>((rows + rows_per_chunk - 1) / rows_per_chunk);
    const size_t per = static_cast<size_t>(chunks) * static_cast<size_t>(dim);
    float* pw = static_cast<float*>(c.scratch(sizeof(float) * per * partial_rows));
    float* pb = db ? pw + per : nullptr;
    float* px = dxs ? pw + per * (db ? 2 : 1) : nullptr;
    auto pick = [&](auto bias) {
      constexpr bool kB = decltype(bias)::value;
      if (warp_rows) {
        wr::with_vecs(vecs, [&](auto v) {
          constexpr int kV = decltype(v)::value;
          auto go = [&](auto kernel) {
            launch(name, kernel, static_cast<unsigned>(chunks), wr::kThreads, sizeof(float) * wr::kRowsPerBlock * static_cast<size_t>(dim), c.stream,
                   static_cast<const T*>(dout), static_cast<const T*>(x), static_cast<const T*>(w), mean, rstd, static_cast<T*>(dx),
                   static_cast<const T*>(dres), pw, pb, px, rows, dim, w_off, rows_per_chunk);
          };
          // dX's column sums: a third row of accumulators, only where it fits in registers.
          if constexpr (wr::sums_fit(kV, sizeof(T))) {
            if (px) return go(wr::backward_kernel<T, kLayer, kB, kV, true>);
          }
          go(wr::backward_kernel<T, kLayer, kB, kV, false>);
        });
        return;
      }
      auto go = [&](auto kernel) {
        launch(name, kernel, static_cast<unsigned>(chunks), l.threads, 0, c.stream, static_cast<const T*>(dout), static_cast<const T*>(x),
               static_cast<const T*>(w), mean, rstd, static_cast<T*>(dx), static_cast<const T*>(dres), pw, pb, px, rows, dim, w_off, l.tpr, rows_per_chunk);
      };
      // Rows over 8 values per thread take the uncached path: 16 values per thread of
      // x, dOut and weight exceed sm_100's 128 registers at 512 threads and spill.
      if (l.vpt == kVpt) go(norm_backward_kernel<T, kLayer, kB, kVpt>);
      else go(norm_backward_kernel<T, kLayer, kB, 0>);
    };
    if constexpr (kLayer) {
      if (db) pick(std::true_type{});
      else pick(std::false_type{});
    } else {
      pick(std::false_type{});  // rmsNorm has no bias
    }
    // dWeight, then dBias and dX's column sums where asked for, in one launch.
    PartialSets<G> sets{{pw, nullptr, nullptr}, {static_cast<G*>(dw), nullptr, nullptr}};
    int count = 1;
    if (pb) sets.partial[count] = pb, sets.out[count++] = static_cast<G*>(db);
    if (px) sets.partial[count] = px, sets.out[count++] = static_cast<G*>(dxs);
    launch_sum_chunk_partials<G>(name, c.stream, sets, count, chunks, dim, true);
  });
}

// layerNormForward: x, weight, bias, out, mean, rstd, residual, sum | rows, dim, eps, dtype
void launch_layer_norm_forward(const KernelCall& c) {
  run_forward<true>("layerNormForward", c, c.ptr<void>(0), c.ptr<void>(1), c.ptr<void>(2), c.ptr<void>(3), c.ptr<float>(4), c.ptr<float>(5),
                    c.ptr<const void>(6), c.ptr<void>(7), c.i64(8), c.i32(9), c.f32(10), 0.0f, c.i32(11));
}

// layerNormBackward: dOut, x, weight, mean, rstd, dX, dWeight, dBias, dResidual, dXColSums | rows, dim, dtype,
// gradDtype (dWeight's, dBias's and dXColSums')
void launch_layer_norm_backward(const KernelCall& c) {
  run_backward<true>("layerNormBackward", c, c.ptr<void>(0), c.ptr<void>(1), c.ptr<void>(2), c.ptr<const float>(3), c.ptr<const float>(4),
                     c.ptr<void>(5), c.ptr<void>(6), c.ptr<void>(7), c.ptr<const void>(8), c.ptr<void>(9), c.i64(10), c.i32(11), 0.0f, c.i32(12), c.i32(13));
}

// rmsNormForward: x, weight, out, rstd, residual, sum | rows, dim, eps, dtype, weightOffset
void launch_rms_norm_forward(const KernelCall& c) {
  run_forward<false>("rmsNormForward", c, c.ptr<void>(0), c.ptr<void>(1), nullptr, c.ptr<void>(2), nullptr, c.ptr<float>(3), c.ptr<const void>(4),
                     c.ptr<void>(5), c.i64(6), c.i32(7), c.f32(8), c.f32(10), c.i32(9));
}

// rmsNormBackward: dOut, x, weight, rstd, dX, dWeight, dResidual, dXColSums | rows, dim, dtype, gradDtype (dWeight's and dXColSums'),
// weightOffset
void launch_rms_norm_backward(const KernelCall& c) {
  run_backward<false>("rmsNormBackward", c, c.ptr<void>(0), c.ptr<void>(1), c.ptr<void>(2), nullptr, c.ptr<const float>(3), c.ptr<void>(4),
                      c.ptr<void>(5), nullptr, c.ptr<const void>(6), c.ptr<void>(7), c.i64(8), c.i32(9), c.f32(12), c.i32(10), c.i32(11));
}

}  // namespace

KILN_REGISTER_KERNEL("layerNormForward", launch_layer_norm_forward);
KILN_REGISTER_KERNEL("layerNormBackward", launch_layer_norm_backward);
KILN_REGISTER_KERNEL("rmsNormForward", launch_rms_norm_forward);
KILN_REGISTER_KERNEL("rmsNormBackward", launch_rms_norm_backward);

}  // namespace kiln
