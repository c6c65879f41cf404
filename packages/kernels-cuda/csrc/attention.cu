// attention.cu: causal scaled-dot-product attention, flash style, GQA aware.
//
// Math, for query head h reading kv head g = h / (heads / kvHeads):
//   s[t,u] = scale * q[t]·k[u] for u <= t;  p = softmax_u(s);  out[t] = sum_u p[t,u] v[u]
//   lse[t] = log sum_u exp(s[t,u])
// Backward, with D[t] = dOut[t]·out[t] and p recomputed as exp(s - lse):
//   dP = dOut v^T;  dS = p (dP - D);  dQ = scale dS k;  dK = scale dS^T q;  dV = p^T dOut
// dK and dV of kv head g sum over the query heads of its group. Exponentials are
// taken base 2 on scores pre-multiplied by log2(e).
//
// Memory layout (row-major, one row per token, elements of T = f32 / bf16 / f16):
//   q, out, dQ, dOut: row (b*T + t), columns [h*D, h*D + D), rows qRowStride / outRowStride apart
//   k, v, dK, dV:     row (b*T + u), columns [g*D, g*D + D), rows kvRowStride apart
//   lse:              f32 (batch, heads, T)
// Only those logical elements are read or written, so q/k/v (and dQ/dK/dV) may be
// interleaved slices of one packed buffer. dQ, dK, dV are overwritten.
//
// Tiling: a block of NW warps owns NW * 4 * RM rows (queries, or keys for dK/dV);
// lane = rg * 8 + cg: row group rg (RM consecutive rows), column group cg. Tiles
// live in dynamic shared memory as f32 rows of ds = round_up(D, 32) + 4 floats
// (zero padded; ds = 4 mod 8 keeps the float4 reads of 8 rows conflict free).
// Two register-tiled products cover every step:
//   nt: C(rows x cols) += A B^T over the head dimension (S = Q K^T, dP = dO V^T, ...);
//       thread columns j*8 + cg;
//   nn: C(rows x D) += A B over the tile, A a per-warp tile (P, dS, P^T, dS^T);
//       thread columns blk*32 + cg*4 + e.
// Tile sizes are chosen at launch from D (buckets 32, 64, 128, 256); nothing of
// size T x T exists beyond one tile. Tiles above the causal diagonal are skipped.
//
// Kernels:
//   forward:  one block per (query tile, head, batch), online softmax over kv tiles.
//   backward: (1) D[t] per query row and head into scratch (laid out like lse);
//             (2) one block per (kv tile, kv head, batch): loops over the query tiles of
//                 every head of the GQA group, accumulates dK, dV in registers, writes once;
//             (3) one block per (query tile, head, batch): loops over kv tiles,
//                 accumulates dQ in registers, writes once.
// Every output element has one writer and every sum runs in a fixed order: results
// do not depend on block or thread scheduling. No atomics.
#include <type_traits>

#include "kiln_cuda.h"
#include "runtime/raw_runtime.h"

namespace kiln {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

__device__ __forceinline__ float4 ld4(const float* p) {
#if defined(KILN_CUDA_SIM)
  float4 r;
  r.x = p[0];
  r.y = p[1];
  r.z = p[2];
  r.w = p[3];
  return r;
#else
  return *reinterpret_cast<const float4*>(p);
#endif
}

/** Max / sum over the 8 column-group lanes that share a row group. */
__device__ __forceinline__ float max8(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
}
__device__ __forceinline__ float sum8(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x + __shfl_xor_sync(0xffffffffu, x, 4);
}

/**
 * dst (rows x ds floats) = mul * src rows [0, valid) x columns [0, d), zeros in the
 * rest of [0, rows) x [0, dw). src points at column 0 of the tile's first row.
 */
template <typename T, int NW>
__device__ __forceinline__ void load_tile(float* dst, int ds, const T* src, int64_t stride, int rows, int valid, int d, int dw, float mul) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < rows; r += NW) {
    for (int c = lane; c < dw; c += 32) {
      float x = 0.0f;
      if (r < valid && c < d) x = mul * to_f32(src[r * stride + c]);
      dst[r * ds + c] = x;
    }
  }
}

/**
 * acc[i][j] += sum_{k < depth} a[i*lda + k] * b[j*8*ldb + k]; depth a multiple of 4.
 * a: the thread's first row (RM consecutive rows), b: its first column row (row cg).
 */
template <int RM, int NC>
__device__ __forceinline__ void nt_product(float (&acc)[RM][NC], const float* a, int lda, const float* b, int ldb, int depth) {
  for (int k = 0; k < depth; k += 4) {
    float4 av[RM], bv[NC];
#pragma unroll
    for (int i = 0; i < RM; i++) av[i] = ld4(a + i * lda + k);
#pragma unroll
    for (int j = 0; j < NC; j++) bv[j] = ld4(b + j * 8 * ldb + k);
#pragma unroll
    for (int i = 0; i < RM; i++) {
#pragma unroll
      for (int j = 0; j < NC; j++) {
        float s = acc[i][j];
        s = fmaf(av[i].x, bv[j].x, s);
        s = fmaf(av[i].y, bv[j].y, s);
        s = fmaf(av[i].z, bv[j].z, s);
        acc[i][j] = fmaf(av[i].w, bv[j].w, s);
      }
    }
  }
}

/**
 * acc[i][blk*4 + e] += sum_{k0 <= k < k1} a[i*lda + k] * b[k*ldb + blk*32 + e] for blk < nblk;
 * k0, k1 multiples of 4. a: the thread's first row of a per-warp tile, b: column cg*4.
 */
template <int RM, int NB>
__device__ __forceinline__ void nn_product(float (&acc)[RM][NB * 4], const float* a, int lda, const float* b, int ldb, int k0, int k1, int nblk) {
  for (int k = k0; k < k1; k += 4) {
    float4 av[RM];
#pragma unroll
    for (int i = 0; i < RM; i++) av[i] = ld4(a + i * lda + k);
#pragma unroll
    for (int blk = 0; blk < NB; blk++) {
      if (blk < nblk) {
        const float* bp = b + k * ldb + blk * 32;
        const float4 b0 = ld4(bp), b1 = ld4(bp + ldb), b2 = ld4(bp + 2 * ldb), b3 = ld4(bp + 3 * ldb);
#pragma unroll
        for (int i = 0; i < RM; i++) {
          float* c = acc[i] + blk * 4;
          c[0] = fmaf(av[i].w, b3.x, fmaf(av[i].z, b2.x, fmaf(av[i].y, b1.x, fmaf(av[i].x, b0.x, c[0]))));
          c[1] = fmaf(av[i].w, b3.y, fmaf(av[i].z, b2.y, fmaf(av[i].y, b1.y, fmaf(av[i].x, b0.y, c[1]))));
          c[2] = fmaf(av[i].w, b3.z, fmaf(av[i].z, b2.z, fmaf(av[i].y, b1.z, fmaf(av[i].x, b0.z, c[2]))));
          c[3] = fmaf(av[i].w, b3.w, fmaf(av[i].z, b2.w, fmaf(av[i].y, b1.w, fmaf(av[i].x, b0.w, c[3]))));
        }
      }
    }
  }
}

/** Row i of the thread's accumulator, times mul, into columns blk*32 + cg*4 + e < d of `row`. */
template <typename T, int RM, int NB>
__device__ __forceinline__ void store_row(T* row, const float (&acc)[RM][NB * 4], int i, int cg, int d, float mul) {
#pragma unroll
  for (int blk = 0; blk < NB; blk++) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int col = blk * 32 + cg * 4 + e;
      if (col < d) row[col] = from_f32<T>(acc[i][blk * 4 + e] * mul);
    }
  }
}

struct Geometry {
  int dw, ds, dp4, nblk;
};
__device__ __forceinline__ Geometry geometry(int d) {
  Geometry g;
  g.dw = (d + 31) & ~31;
  g.ds = g.dw + 4;
  g.dp4 = (d + 3) & ~3;
  g.nblk = g.dw / 32;
  return g;
}

// ---- forward ----------------------------------------------------------------------

template <typename T, int DMAX, int RM, int NW, int BK>
__global__ void __launch_bounds__(NW * 32, 1)
    attention_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                             float* __restrict__ lse, int batch, int seq, int heads, int kv_heads, int d, int64_t q_stride,
                             int64_t kv_stride, int64_t out_stride, float scale) {
  constexpr int RW = 4 * RM, BQ = NW * RW, NB = DMAX / 32, NC = BK / 8, PS = BK + 4;
  const Geometry gm = geometry(d);
  const int ds = gm.ds;
  KILN_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* ks = qs + BQ * ds;
  float* vs = ks + BK * ds;
  float* ps = vs + BK * ds;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane >> 3, cg = lane & 7;
  const int row0 = warp * RW + rg * RM;
  float* pw = ps + warp * RW * PS + rg * RM * PS;

  // Longest (last) query tiles first.
  const int n_qt = (seq + BQ - 1) / BQ;
  const int64_t hb = int64_t{heads} * batch;
  const int qt = n_qt - 1 - static_cast<int>(int64_t{blockIdx.x} / hb);
  const int64_t rest = int64_t{blockIdx.x} % hb;
  const int h = static_cast<int>(rest % heads), b = static_cast<int>(rest / heads);
  const int g = h / (heads / kv_heads);
  const int q0 = qt * BQ, nq = min(BQ, seq - q0);
  const int64_t tok0 = int64_t{b} * seq;

  load_tile<T, NW>(qs, ds, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, BQ, nq, d, gm.dw, scale * kLog2e);
  const T* kb = k + tok0 * kv_stride + int64_t{g} * d;
  const T* vb = v + tok0 * kv_stride + int64_t{g} * d;

  float o[RM][NB * 4], m[RM], l[RM];
#pragma unroll
  for (int i = 0; i < RM; i++) {
    m[i] = neg_inf();
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < NB * 4; c++) o[i][c] = 0.0f;
  }

  const int n_kt = (q0 + nq - 1) / BK + 1;
  const int wlast = q0 + warp * RW + RW - 1;  // last query row of this warp
  for (int kt = 0; kt < n_kt; kt++) {
    const int kv0 = kt * BK, nk = min(BK, seq - kv0);
    __syncthreads();  // the previous tile's K and V are no longer read
    load_tile<T, NW>(ks, ds, kb + int64_t{kv0} * kv_stride, kv_stride, BK, nk, d, gm.dw, 1.0f);
    load_tile<T, NW>(vs, ds, vb + int64_t{kv0} * kv_stride, kv_stride, BK, nk, d, gm.dw, 1.0f);
    __syncthreads();

    float s[RM][NC];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < NC; j++) s[i][j] = 0.0f;
    nt_product<RM, NC>(s, qs + row0 * ds, ds, ks + cg * ds, ds, gm.dp4);

    // Online softmax. Tile 0 holds key 0 <= t for every row, so m is finite from then on.
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const int t = q0 + row0 + i;
      float mx = neg_inf();
#pragma unroll
      for (int j = 0; j < NC; j++) {
        const int u = kv0 + j * 8 + cg;
        if (u > t || u >= seq) s[i][j] = neg_inf();
        mx = fmaxf(mx, s[i][j]);
      }
      mx = max8(mx);
      const float m_new = fmaxf(m[i], mx);
      const float alpha = exp2f(m[i] - m_new);
      float rs = 0.0f;
#pragma unroll
      for (int j = 0; j < NC; j++) {
        const float p = exp2f(s[i][j] - m_new);
        rs += p;
        pw[i * PS + j * 8 + cg] = p;
      }
      rs = sum8(rs);
      l[i] = l[i] * alpha + rs;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < NB * 4; c++) o[i][c] *= alpha;
    }
    __syncwarp();
    // Keys past the warp's last query have p = 0: skip them.
    const int depth = min(BK, (wlast - kv0 + 1 + 3) & ~3);
    if (depth > 0) nn_product<RM, NB>(o, pw, PS, vs + cg * 4, ds, 0, depth, gm.nblk);
    __syncwarp();
  }

#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int t = q0 + row0 + i;
    if (t < seq) {
      store_row<T, RM, NB>(out + (tok0 + t) * out_stride + int64_t{h} * d, o, i, cg, d, 1.0f / l[i]);
      if (cg == 0) lse[(int64_t{b} * heads + h) * seq + t] = (m[i] + log2f(l[i])) * kLn2;
    }
  }
}

// ---- backward (1): D = dOut · out ---------------------------------------------------

constexpr int kDotWarps = 8;

/** dvec[(b*heads + h)*seq + t] = dOut[b,t,h]·out[b,t,h]; one warp per (token, head). */
template <typename T>
__global__ void __launch_bounds__(kDotWarps * 32)
    attention_dot_kernel(const T* __restrict__ dout, const T* __restrict__ out, float* __restrict__ dvec, int64_t items, int seq,
                         int heads, int d, int64_t out_stride) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int64_t item = int64_t{blockIdx.x} * kDotWarps + warp; item < items; item += int64_t{gridDim.x} * kDotWarps) {
    const int64_t tok = item / heads;
    const int h = static_cast<int>(item % heads);
    const int64_t off = tok * out_stride + int64_t{h} * d;
    float s = 0.0f;
    for (int c = lane; c < d; c += 32) s = fmaf(to_f32(dout[off + c]), to_f32(out[off + c]), s);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
      const int64_t b = tok / seq, t = tok % seq;
      dvec[(b * heads + h) * seq + t] = s;
    }
  }
}

// ---- backward (2): dK, dV per kv tile -------------------------------------------------

template <typename T, int DMAX, int RM, int NW, int BQ>
__global__ void __launch_bounds__(NW * 32, 1)
    attention_dkdv_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dk, T* __restrict__ dv,
                          int batch, int seq, int heads, int kv_heads, int d, int64_t q_stride, int64_t kv_stride,
                          int64_t out_stride, float scale) {
  constexpr int RW = 4 * RM, BKV = NW * RW, NB = DMAX / 32, NC = BQ / 8, PS = BQ + 4;
  const Geometry gm = geometry(d);
  const int ds = gm.ds;
  KILN_DYNAMIC_SHARED(float, smem);
  float* ks = smem;
  float* vs = ks + BKV * ds;
  float* qs = vs + BKV * ds;
  float* dos = qs + BQ * ds;
  float* ls = dos + BQ * ds;
  float* dl = ls + BQ;
  float* pt = dl + BQ;
  float* dst = pt + NW * RW * PS;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane >> 3, cg = lane & 7;
  const int row0 = warp * RW + rg * RM;
  float* ptw = pt + warp * RW * PS + rg * RM * PS;
  float* dstw = dst + warp * RW * PS + rg * RM * PS;

  // Key tiles in order: the first ones see the most query tiles.
  const int64_t kb_count = int64_t{kv_heads} * batch;
  const int kt = static_cast<int>(int64_t{blockIdx.x} / kb_count);
  const int64_t rest = int64_t{blockIdx.x} % kb_count;
  const int g = static_cast<int>(rest % kv_heads), b = static_cast<int>(rest / kv_heads);
  const int group = heads / kv_heads;
  const int kv0 = kt * BKV, nk = min(BKV, seq - kv0);
  const int64_t tok0 = int64_t{b} * seq;

  load_tile<T, NW>(ks, ds, k + (tok0 + kv0) * kv_stride + int64_t{g} * d, kv_stride, BKV, nk, d, gm.dw, 1.0f);
  load_tile<T, NW>(vs, ds, v + (tok0 + kv0) * kv_stride + int64_t{g} * d, kv_stride, BKV, nk, d, gm.dw, 1.0f);

  float ak[RM][NB * 4], av[RM][NB * 4];
#pragma unroll
  for (int i = 0; i < RM; i++)
#pragma unroll
    for (int c = 0; c < NB * 4; c++) ak[i][c] = av[i][c] = 0.0f;

  const int n_qt = (seq + BQ - 1) / BQ, qt0 = kv0 / BQ;
  const int wfirst = kv0 + warp * RW;  // first key row of this warp
  for (int hh = 0; hh < group; hh++) {
    const int h = g * group + hh;
    const int64_t lrow = (int64_t{b} * heads + h) * seq;
    for (int qt = qt0; qt < n_qt; qt++) {
      const int q0 = qt * BQ, nq = min(BQ, seq - q0);
      __syncthreads();  // the previous query tile is no longer read
      // Q pre-scaled by `scale`: S^T = K (scale Q)^T and dK = dS^T (scale Q).
      load_tile<T, NW>(qs, ds, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, BQ, nq, d, gm.dw, scale);
      load_tile<T, NW>(dos, ds, dout + (tok0 + q0) * out_stride + int64_t{h} * d, out_stride, BQ, nq, d, gm.dw, 1.0f);
      for (int r = threadIdx.x; r < BQ; r += NW * 32) {
        ls[r] = r < nq ? lse[lrow + q0 + r] * kLog2e : 0.0f;
        dl[r] = r < nq ? dvec[lrow + q0 + r] : 0.0f;
      }
      __syncthreads();

      float st[RM][NC], dpt[RM][NC];
#pragma unroll
      for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < NC; j++) st[i][j] = dpt[i][j] = 0.0f;
      nt_product<RM, NC>(st, ks + row0 * ds, ds, qs + cg * ds, ds, gm.dp4);
      nt_product<RM, NC>(dpt, vs + row0 * ds, ds, dos + cg * ds, ds, gm.dp4);
#pragma unroll
      for (int i = 0; i < RM; i++) {
        const int u = kv0 + row0 + i;
#pragma unroll
        for (int j = 0; j < NC; j++) {
          const int tl = j * 8 + cg, t = q0 + tl;
          const float p = (t >= u && t < seq && u < seq) ? exp2f(st[i][j] * kLog2e - ls[tl]) : 0.0f;
          ptw[i * PS + tl] = p;
          dstw[i * PS + tl] = p * (dpt[i][j] - dl[tl]);
        }
      }
      __syncwarp();
      // Queries before the warp's first key have p = 0; rows past nq are zero.
      const int k0 = min(max(wfirst - q0, 0) & ~3, BQ), k1 = (nq + 3) & ~3;
      if (k0 < k1) {
        nn_product<RM, NB>(av, ptw, PS, dos + cg * 4, ds, k0, k1, gm.nblk);
        nn_product<RM, NB>(ak, dstw, PS, qs + cg * 4, ds, k0, k1, gm.nblk);
      }
      __syncwarp();
    }
  }

#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int u = kv0 + row0 + i;
    if (u < seq) {
      const int64_t off = (tok0 + u) * kv_stride + int64_t{g} * d;
      store_row<T, RM, NB>(dk + off, ak, i, cg, d, 1.0f);
      store_row<T, RM, NB>(dv + off, av, i, cg, d, 1.0f);
    }
  }
}

// ---- backward (3): dQ per query tile -----------------------------------------------

template <typename T, int DMAX, int RM, int NW, int BK>
__global__ void __launch_bounds__(NW * 32, 1)
    attention_dq_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dq, int batch, int seq,
                        int heads, int kv_heads, int d, int64_t q_stride, int64_t kv_stride, int64_t out_stride, float scale) {
  constexpr int RW = 4 * RM, BQ = NW * RW, NB = DMAX / 32, NC = BK / 8, PS = BK + 4;
  const Geometry gm = geometry(d);
  const int ds = gm.ds;
  KILN_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* dos = qs + BQ * ds;
  float* ks = dos + BQ * ds;
  float* vs = ks + BK * ds;
  float* dsm = vs + BK * ds;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane >> 3, cg = lane & 7;
  const int row0 = warp * RW + rg * RM;
  float* dsw = dsm + warp * RW * PS + rg * RM * PS;

  const int n_qt = (seq + BQ - 1) / BQ;
  const int64_t hb = int64_t{heads} * batch;
  const int qt = n_qt - 1 - static_cast<int>(int64_t{blockIdx.x} / hb);
  const int64_t rest = int64_t{blockIdx.x} % hb;
  const int h = static_cast<int>(rest % heads), b = static_cast<int>(rest / heads);
  const int g = h / (heads / kv_heads);
  const int q0 = qt * BQ, nq = min(BQ, seq - q0);
  const int64_t tok0 = int64_t{b} * seq;
  const int64_t lrow = (int64_t{b} * heads + h) * seq;

  load_tile<T, NW>(qs, ds, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, BQ, nq, d, gm.dw, scale * kLog2e);
  load_tile<T, NW>(dos, ds, dout + (tok0 + q0) * out_stride + int64_t{h} * d, out_stride, BQ, nq, d, gm.dw, 1.0f);
  const T* kb = k + tok0 * kv_stride + int64_t{g} * d;
  const T* vb = v + tok0 * kv_stride + int64_t{g} * d;

  float lr[RM], dr[RM], acc[RM][NB * 4];
#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int t = q0 + row0 + i;
    lr[i] = t < seq ? lse[lrow + t] * kLog2e : 0.0f;
    dr[i] = t < seq ? dvec[lrow + t] : 0.0f;
#pragma unroll
    for (int c = 0; c < NB * 4; c++) acc[i][c] = 0.0f;
  }

  const int n_kt = (q0 + nq - 1) / BK + 1;
  const int wlast = q0 + warp * RW + RW - 1;
  for (int kt = 0; kt < n_kt; kt++) {
    const int kv0 = kt * BK, nk = min(BK, seq - kv0);
    __syncthreads();
    load_tile<T, NW>(ks, ds, kb + int64_t{kv0} * kv_stride, kv_stride, BK, nk, d, gm.dw, 1.0f);
    load_tile<T, NW>(vs, ds, vb + int64_t{kv0} * kv_stride, kv_stride, BK, nk, d, gm.dw, 1.0f);
    __syncthreads();

    float s[RM][NC], dp[RM][NC];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < NC; j++) s[i][j] = dp[i][j] = 0.0f;
    nt_product<RM, NC>(s, qs + row0 * ds, ds, ks + cg * ds, ds, gm.dp4);
    nt_product<RM, NC>(dp, dos + row0 * ds, ds, vs + cg * ds, ds, gm.dp4);
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const int t = q0 + row0 + i;
#pragma unroll
      for (int j = 0; j < NC; j++) {
        const int u = kv0 + j * 8 + cg;
        const float p = (u <= t && t < seq && u < seq) ? exp2f(s[i][j] - lr[i]) : 0.0f;
        dsw[i * PS + j * 8 + cg] = p * (dp[i][j] - dr[i]);
      }
    }
    __syncwarp();
    const int depth = min(BK, (wlast - kv0 + 1 + 3) & ~3);
    if (depth > 0) nn_product<RM, NB>(acc, dsw, PS, ks + cg * 4, ds, 0, depth, gm.nblk);
    __syncwarp();
  }

#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int t = q0 + row0 + i;
    if (t < seq) store_row<T, RM, NB>(dq + (tok0 + t) * q_stride + int64_t{h} * d, acc, i, cg, d, scale);
  }
}

// ---- launch configurations ------------------------------------------------------------

// Per head-dim bucket: rows per thread RM, warps NW, and the tile width of the loop.
template <int DMAX> struct Config;
template <> struct Config<32> {
  static constexpr int kFwdRM = 4, kFwdBK = 64, kKvRM = 4, kKvBQ = 32, kQRM = 4, kQBK = 32;
};
template <> struct Config<64> {
  static constexpr int kFwdRM = 4, kFwdBK = 64, kKvRM = 4, kKvBQ = 32, kQRM = 4, kQBK = 32;
};
template <> struct Config<128> {
  static constexpr int kFwdRM = 4, kFwdBK = 32, kKvRM = 2, kKvBQ = 32, kQRM = 2, kQBK = 32;
};
template <> struct Config<256> {
  static constexpr int kFwdRM = 2, kFwdBK = 16, kKvRM = 1, kKvBQ = 16, kQRM = 1, kQBK = 16;
};
constexpr int kWarps = 4;

struct Args {
  int batch, seq, heads, kv_heads, d;
  int64_t q_stride, kv_stride, out_stride;
  float scale;
  int dtype;
};

Args read_args(const KernelCall& c, int first) {
  Args a;
  a.batch = c.i32(first);
  a.seq = c.i32(first + 1);
  a.heads = c.i32(first + 2);
  a.kv_heads = c.i32(first + 3);
  a.d = c.i32(first + 4);
  a.q_stride = c.i64(first + 5);
  a.kv_stride = c.i64(first + 6);
  a.out_stride = c.i64(first + 7);
  a.scale = c.f32(first + 8);
  a.dtype = c.i32(first + 9);
  return a;
}

size_t row_floats(int d) { return static_cast<size_t>((d + 31) / 32 * 32 + 4); }

/** Opts a kernel into more than 48 KiB of dynamic shared memory (real device only). */
template <typename K>
void allow_shared(K* kernel, size_t bytes) {
#if !defined(KILN_CUDA_SIM)
  if (bytes > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
#else
  (void)kernel;
  (void)bytes;
#endif
}

/** Calls f(std::integral_constant<int, DMAX>) for the bucket holding head dim d. */
template <typename F>
void dispatch_head_dim(int d, const char* kernel, F&& f) {
  if (d <= 32) f(std::integral_constant<int, 32>{});
  else if (d <= 64) f(std::integral_constant<int, 64>{});
  else if (d <= 128) f(std::integral_constant<int, 128>{});
  else if (d <= 256) f(std::integral_constant<int, 256>{});
  else throw DeviceFailure(std::string(kernel) + ": headDim " + std::to_string(d) + " is above 256");
}

// attentionForward: q, k, v, out, lse | batch, seqLen, heads, kvHeads, headDim, qRowStride, kvRowStride, outRowStride, scale, dtype
void launch_attention_forward(const KernelCall& c) {
  const Args a = read_args(c, 5);
  dispatch_float(a.dtype, "attentionForward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(a.d, "attentionForward", [&](auto dmax) {
      constexpr int DMAX = decltype(dmax)::value, RM = Config<DMAX>::kFwdRM, BK = Config<DMAX>::kFwdBK;
      constexpr int BQ = kWarps * 4 * RM;
      const size_t ds = row_floats(a.d);
      const size_t smem = (BQ * ds + 2 * BK * ds + size_t{BQ} * (BK + 4)) * sizeof(float);
      auto kernel = attention_forward_kernel<T, DMAX, RM, kWarps, BK>;
      allow_shared(kernel, smem);
      const unsigned grid = ceil_div(a.seq, BQ) * static_cast<unsigned>(a.heads * a.batch);
      launch("attentionForward", kernel, dim3(grid), dim3(kWarps * 32), smem, c.stream, c.ptr<const T>(0), c.ptr<const T>(1),
             c.ptr<const T>(2), c.ptr<T>(3), c.ptr<float>(4), a.batch, a.seq, a.heads, a.kv_heads, a.d, a.q_stride, a.kv_stride,
             a.out_stride, a.scale);
    });
  });
}

// attentionBackward: dOut, q, k, v, out, lse, dQ, dK, dV | batch, seqLen, heads, kvHeads, headDim, qRowStride, kvRowStride, outRowStride, scale, dtype
void launch_attention_backward(const KernelCall& c) {
  const Args a = read_args(c, 9);
  const int64_t items = int64_t{a.batch} * a.seq * a.heads;
  float* dvec = static_cast<float*>(c.scratch(static_cast<size_t>(items) * sizeof(float)));
  dispatch_float(a.dtype, "attentionBackward", [&](auto tag) {
    using T = decltype(tag);
    const T* dout = c.ptr<const T>(0);
    const T* q = c.ptr<const T>(1);
    const T* k = c.ptr<const T>(2);
    const T* v = c.ptr<const T>(3);
    const T* out = c.ptr<const T>(4);
    const float* lse = c.ptr<const float>(5);
    T* dq = c.ptr<T>(6);
    T* dk = c.ptr<T>(7);
    T* dv = c.ptr<T>(8);

    dispatch_head_dim(a.d, "attentionBackward", [&](auto dmax) {
      constexpr int DMAX = decltype(dmax)::value;
      const size_t ds = row_floats(a.d);
      const int64_t dot_blocks = (items + kDotWarps - 1) / kDotWarps;
      launch("attentionBackward", attention_dot_kernel<T>, dim3(static_cast<unsigned>(dot_blocks < 65535 * 8 ? dot_blocks : 65535 * 8)),
             dim3(kDotWarps * 32), 0, c.stream, dout, out, dvec, items, a.seq, a.heads, a.d, a.out_stride);
      {
        constexpr int RM = Config<DMAX>::kKvRM, BQ = Config<DMAX>::kKvBQ, BKV = kWarps * 4 * RM;
        const size_t smem = (2 * BKV * ds + 2 * BQ * ds + 2 * BQ + 2 * size_t{BKV} * (BQ + 4)) * sizeof(float);
        auto kernel = attention_dkdv_kernel<T, DMAX, RM, kWarps, BQ>;
        allow_shared(kernel, smem);
        const unsigned grid = ceil_div(a.seq, BKV) * static_cast<unsigned>(a.kv_heads * a.batch);
        launch("attentionBackward", kernel, dim3(grid), dim3(kWarps * 32), smem, c.stream, dout, q, k, v, lse,
               static_cast<const float*>(dvec), dk, dv, a.batch, a.seq, a.heads, a.kv_heads, a.d, a.q_stride, a.kv_stride,
               a.out_stride, a.scale);
      }
      {
        constexpr int RM = Config<DMAX>::kQRM, BK = Config<DMAX>::kQBK, BQ = kWarps * 4 * RM;
        const size_t smem = (2 * BQ * ds + 2 * BK * ds + size_t{BQ} * (BK + 4)) * sizeof(float);
        auto kernel = attention_dq_kernel<T, DMAX, RM, kWarps, BK>;
        allow_shared(kernel, smem);
        const unsigned grid = ceil_div(a.seq, BQ) * static_cast<unsigned>(a.heads * a.batch);
        launch("attentionBackward", kernel, dim3(grid), dim3(kWarps * 32), smem, c.stream, dout, q, k, v, lse,
               static_cast<const float*>(dvec), dq, a.batch, a.seq, a.heads, a.kv_heads, a.d, a.q_stride, a.kv_stride,
               a.out_stride, a.scale);
      }
    });
  });
}

}  // namespace

KILN_REGISTER_KERNEL("attentionForward", launch_attention_forward);
KILN_REGISTER_KERNEL("attentionBackward", launch_attention_backward);

}  // namespace kiln
