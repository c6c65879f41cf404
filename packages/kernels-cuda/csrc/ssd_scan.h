// ssd_scan.h: what the selective scan's kernels share (ssd.cu forward, ssd_backward.cu
// backward; mamba3.cu and mamba3_backward.cu use the same pieces): the dimensions, a
// thread's (b, h, chunk), dt and the running sum of dt·A, each chunk's outer-product sum
// and the sequential pass over chunks, the group sums of dB and dC, the parameter
// partials and their sums, the token tiles (ssd_y.h and ssd_token_tile.h hold the
// forward's y kernel and the backward's token tile, which both scans use too). The math and the kernels are
// described at the top of ssd.cu.
#pragma once
#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxQ = 256;  // SSD_MAX_CHUNK_SIZE in @kiln/contract

struct SsdDims {
  int64_t batch, L, H, P, G, N, Q, chunks;
  int64_t xs, dts, bcs;  // row strides of x, dtRaw, B/C (and their gradients)
  int64_t bh0;           // kernels with a block row per b·h: the first b·h of this launch
  __host__ __device__ int64_t PN() const { return P * N; }
};

/**
 * Launches a kernel whose grid.y walks b·h (one block row per batch item and head) in
 * slices of at most max_grid_y() rows: launch_slice(dims with bh0 set, rows in the slice).
 */
template <typename F>
void over_bh_slices(const SsdDims& d, F&& launch_slice) {
  const int64_t bhs = d.batch * d.H, most = max_grid_y();
  for (int64_t bh0 = 0; bh0 < bhs; bh0 += most) {
    SsdDims s = d;
    s.bh0 = bh0;
    launch_slice(s, static_cast<unsigned>(bhs - bh0 < most ? bhs - bh0 : most));
  }
}

__device__ __forceinline__ float softplus_f(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

/**
 * Sums each of a lane's K values over the warp's 32 lanes (K a power of two, 2 to 32) in
 * K - 1 + 5 - log2 K shuffles instead of 5 K (16 instead of 80 for K = 16). At offsets 16,
 * 8, ... a lane keeps half of its values, adds its partner's partial sums of that half and
 * hands over the other half (the lane with the offset's bit set keeps the upper half),
 * until one value is left; plain butterfly steps finish it. Afterwards v[0] of lane l
 * holds the warp's sum of value warp_sum_index<K>(l) (the same bits in the 32 / K lanes
 * that hold it); v[1..K) are left partial. The order of the additions is fixed.
 */
template <int K>
__device__ __forceinline__ void warp_sum_many(float (&v)[K]) {
  static_assert(K >= 2 && K <= 32 && (K & (K - 1)) == 0, "warp_sum_many: K a power of two from 2 to 32");
  const unsigned lane = threadIdx.x & 31u;
#pragma unroll
  for (int n = K, o = 16; n > 1; n >>= 1, o >>= 1) {
    const bool upper = (lane & static_cast<unsigned>(o)) != 0;
#pragma unroll
    for (int i = 0; i < n / 2; i++) {
      const float give = upper ? v[i] : v[i + n / 2];
      const float keep = upper ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, give, o);
    }
  }
#pragma unroll
  for (int o = 16 / K; o > 0; o >>= 1) v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
}

/** The value whose sum warp_sum_many<K> leaves in `lane`'s v[0]: the lane's top log2 K bits. */
template <int K>
__device__ __forceinline__ int warp_sum_index(int lane) {
  return lane / (32 / K);
}

/** Whether `lane` is the first of the lanes holding its value after warp_sum_many<K> (one writer per value). */
template <int K>
__device__ __forceinline__ bool warp_sum_writer(int lane) {
  return lane % (32 / K) == 0;
}

/**
 * The work of thread i of a kernel with a thread per (b, h, chunk): b·h, chunk c, its
 * tokens [t0, t1), A = −exp(aLog[h]) and dtBias[h].
 */
struct SsdChunk {
  int64_t bh, b, h, c, t0, t1;
  float A, bias;
  template <typename T>
  __device__ SsdChunk(const SsdDims& d, int64_t i, const T* a_log, const T* dt_bias) {
    bh = i / d.chunks;
    c = i - bh * d.chunks;
    b = bh / d.H;
    h = bh - b * d.H;
    A = -expf(to_f32(a_log[h]));
    bias = to_f32(dt_bias[h]);
    t0 = c * d.Q;
    t1 = t0 + d.Q < d.L ? t0 + d.Q : d.L;
  }
};

/** dtv[bh*L + t] = dt_t, lam[bh*L + t] = Λ_t; one thread per (b, h, chunk). */
template <typename T>
__global__ void __launch_bounds__(kThreads) ssd_prep_kernel(const T* dt_raw, const T* dt_bias, const T* a_log, float* dtv, float* lam, SsdDims d) {
  const int64_t total = d.batch * d.H * d.chunks;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const SsdChunk ch(d, i, a_log, dt_bias);
    float run = 0.0f;
    for (int64_t t = ch.t0; t < ch.t1; t++) {
      const float dt = softplus_f(to_f32(dt_raw[(ch.b * d.L + t) * d.dts + ch.h]) + ch.bias);
      run += dt * ch.A;
      dtv[ch.bh * d.L + t] = dt;
      lam[ch.bh * d.L + t] = run;
    }
  }
}

/**
 * Block (chunk c = blockIdx.x + 1, b·h, 256 elements of the P×N state): a thread per (p, n),
 *   out[(bh*chunks + c − 1)·PN + p·N + n] (+ `shift`·PN) = Σ_{t∈chunk} w_t u_t[p] v_t[n]
 * forward (kForward): chunk c − 1, w_t = exp(E − Λ_t) dt_t, u = x, v = B, written to states[c];
 * backward: chunk c, w_t = exp(Λ_t), u = dy (dense), v = C, written to dS[c − 1].
 * v is in T, or (V = float) a per-head f32 row (the Mamba3 scan's turned B and C, read
 * with d.G = d.H and d.bcs = d.H·d.N); dtv holds the token weights.
 */
template <typename T, bool kForward, typename V = T>
__global__ void __launch_bounds__(kThreads) ssd_chunk_outer_kernel(const T* u, const V* v, const float* dtv, const float* lam, float* out, SsdDims d) {
  __shared__ float w[kMaxQ];
  const int64_t bh = d.bh0 + blockIdx.y;
  const int64_t b = bh / d.H, h = bh - b * d.H, g = h / (d.H / d.G);
  const int64_t c = kForward ? blockIdx.x : blockIdx.x + 1;  // the chunk summed
  const int64_t t0 = c * d.Q, t1 = t0 + d.Q < d.L ? t0 + d.Q : d.L;
  const float* lr = lam + bh * d.L;
  const float E = lr[t1 - 1];
  for (int64_t t = t0 + threadIdx.x; t < t1; t += kThreads) w[t - t0] = kForward ? expf(E - lr[t]) * dtv[bh * d.L + t] : expf(lr[t]);
  __syncthreads();
  const int64_t i = blockIdx.z * int64_t{kThreads} + threadIdx.x;
  if (i >= d.PN()) return;
  const int64_t p = i / d.N, n = i - p * d.N;
  float acc = 0.0f;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t row = b * d.L + t;
    const float uu = kForward ? to_f32(u[row * d.xs + h * d.P + p]) : to_f32(u[(row * d.H + h) * d.P + p]);
    acc = fmaf(w[t - t0] * uu, to_f32(v[row * d.bcs + g * d.N + n]), acc);
  }
  out[(bh * d.chunks + blockIdx.x) * d.PN() + (kForward ? d.PN() : 0) + i] = acc;
}

/**
 * One thread per (b·h, state element): the chunks' contributions (already in buf) turned
 * into the carried value, chunks in order (forward: buf[0] = 0, buf[c] += exp(E_{c−1}) buf[c−1])
 * or in reverse (backward: buf[last] = 0, buf[c] += exp(E_{c+1}) buf[c+1]).
 */
template <bool kForward>
__global__ void __launch_bounds__(kThreads) ssd_carry_kernel(float* buf, const float* lam, SsdDims d) {
  const int64_t total = d.batch * d.H * d.PN();
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t bh = i / d.PN(), e = i - bh * d.PN();
    float* s = buf + bh * d.chunks * d.PN() + e;
    const float* lr = lam + bh * d.L;
    float run = 0.0f;
    if (kForward) {
      s[0] = 0.0f;
      for (int64_t c = 1; c < d.chunks; c++) {
        run = expf(lr[c * d.Q - 1]) * run + s[c * d.PN()];
        s[c * d.PN()] = run;
      }
    } else {
      s[(d.chunks - 1) * d.PN()] = 0.0f;
      for (int64_t c = d.chunks - 2; c >= 0; c--) {
        const int64_t last = (c + 2) * d.Q < d.L ? (c + 2) * d.Q : d.L;
        run = expf(lr[last - 1]) * run + s[c * d.PN()];
        s[c * d.PN()] = run;
      }
    }
  }
}

/**
 * The backward's per-(b, h, chunk) partials of Σ dDt, Σ dt·dΛ (dA) and Σ dy·x: three
 * (H, batch·chunks) planes, summed by ssd_param_kernel in order.
 */
__device__ __forceinline__ void store_param_partials(float* part, const SsdDims& d, const SsdChunk& ch, float sdt, float sa, float sd) {
  const int64_t slot = ch.h * d.batch * d.chunks + ch.b * d.chunks + ch.c;
  const int64_t stride = d.H * d.batch * d.chunks;
  part[slot] = sdt;
  part[stride + slot] = sa;
  part[2 * stride + slot] = sd;
}

/** One thread per head: the partials summed over (batch, chunk) in order, added once (to G: T or f32). */
template <typename T, typename G>
__global__ void __launch_bounds__(kThreads) ssd_param_kernel(const float* part, const T* a_log, G* d_bias, G* d_alog, G* d_d, SsdDims d) {
  const int64_t h = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (h >= d.H) return;
  const int64_t per = d.batch * d.chunks, stride = d.H * per;
  float sdt = 0.0f, sa = 0.0f, sd = 0.0f;
  for (int64_t k = 0; k < per; k++) {
    sdt += part[h * per + k];
    sa += part[stride + h * per + k];
    sd += part[2 * stride + h * per + k];
  }
  const float A = -expf(to_f32(a_log[h]));
  d_bias[h] = from_f32<G>(to_f32(d_bias[h]) + sdt);
  d_alog[h] = from_f32<G>(to_f32(d_alog[h]) + A * sa);
  d_d[h] = from_f32<G>(to_f32(d_d[h]) + sd);
}

/** One thread per (row, group, n): dB and dC, the group's heads' shares summed in order. */
template <typename T>
__global__ void __launch_bounds__(kThreads) ssd_group_sum_kernel(const float* dbh, const float* dch, T* dB, T* dC, SsdDims d) {
  const int64_t GN = d.G * d.N, total = d.batch * d.L * GN, per = d.H / d.G;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t row = i / GN, e = i - row * GN;
    const int64_t g = e / d.N, n = e - g * d.N;
    float sb = 0.0f, sc = 0.0f;
    for (int64_t h = g * per; h < (g + 1) * per; h++) {
      sb += dbh[(row * d.H + h) * d.N + n];
      sc += dch[(row * d.H + h) * d.N + n];
    }
    dB[row * d.bcs + e] = from_f32<T>(sb);
    dC[row * d.bcs + e] = from_f32<T>(sc);
  }
}

/** The token tile of a block: tokens [ta, tb) of chunk c ([t0, t1)); empty past the sequence. */
struct SsdTile {
  int64_t c, t0, t1, ta, tb;
  __device__ SsdTile(const SsdDims& d, int64_t block, int tile) {
    const int64_t per = (d.Q + tile - 1) / tile;
    c = block / per;
    t0 = c * d.Q;
    t1 = t0 + d.Q < d.L ? t0 + d.Q : d.L;
    ta = t0 + (block - c * per) * tile;
    tb = ta + tile < t1 ? ta + tile : t1;
  }
};

SsdDims dims_of(const KernelCall& c, int first) {
  // batch, seqLen, heads, headDim, groups, stateSize, chunkSize, xRowStride, dtRowStride, bcRowStride
  SsdDims d{};
  d.batch = c.i64(first);
  d.L = c.i64(first + 1);
  d.H = c.i64(first + 2);
  d.P = c.i64(first + 3);
  d.G = c.i64(first + 4);
  d.N = c.i64(first + 5);
  d.Q = c.i64(first + 6);
  d.xs = c.i64(first + 7);
  d.dts = c.i64(first + 8);
  d.bcs = c.i64(first + 9);
  d.chunks = (d.L + d.Q - 1) / d.Q;
  return d;
}

size_t elems(int64_t n) { return static_cast<size_t>(n); }

/** Scratch offsets rounded to 64 floats (256 bytes). */
size_t padded(int64_t n) { return (elems(n) + 63) & ~size_t{63}; }

/**
 * The chunks' sums and the pass across them: forward (kForward) states from x, B and the
 * token weights w; backward dS from dy and C. `d` as B or C are read: per_head_rows for
 * Mamba3's per-head f32 rows (V = float), the call's dimensions otherwise.
 */
template <bool kForward, typename T, typename V>
void launch_chunk_states(const char* name, cudaStream_t stream, const T* u, const V* v, const float* w, const float* lam, float* out, const SsdDims& d) {
  if (d.chunks > 1) {
    over_bh_slices(d, [&](const SsdDims& s, unsigned rows) {
      launch(name, ssd_chunk_outer_kernel<T, kForward, V>, dim3(static_cast<unsigned>(d.chunks - 1), rows, ceil_div(elems(d.PN()), kThreads)), kThreads, 0,
             stream, u, v, w, lam, out, s);
    });
  }
  launch(name, ssd_carry_kernel<kForward>, grid_stride_blocks(d.batch * d.H * d.PN(), kThreads), kThreads, 0, stream, out, lam, d);
}

}  // namespace
}  // namespace kiln
