// attention_backward.cu: gradients of causal attention (see attention.cu for the math,
// the layout and the tiling), FlashAttention-2 style in three kernels: D = dOut·out
// per row; dK, dV per kv tile over every query head of its group; dQ per query tile.
// bf16/f16 with headDim and vHeadDim <= 128 run the last two on tensor cores (attention_backward_mma.cu;
// attention_backward_tc.cu, up to 64, with KILN_ATTENTION_PATH=wmma).
// dK, dQ are headDim wide, dV, dOut vHeadDim wide (attention.cu's layout).
// Each output element has one writer and every sum runs in a fixed order (no atomics).
#include "attention_tiles.h"

namespace kiln {
namespace {

// ---- backward (1): D = dOut · out ---------------------------------------------------

constexpr int kDotWarps = 8;

/** dvec[(b*heads + h)*seq + t] = dOut[b,t,h]·out[b,t,h] (d = vHeadDim); one warp per (token, head). */
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
                          const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dk, T* __restrict__ dv_out,
                          int batch, int seq, int heads, int kv_heads, int d, int dv, int64_t q_stride, int64_t kv_stride,
                          int64_t v_stride, int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
  constexpr int RW = 4 * RM, BKV = NW * RW, NB = DMAX / 32, NC = BQ / 8, PS = BQ + 4;
  // Every tile has the row pitch and zero padding of the wider head size; each product
  // runs the depth (dp4) or column blocks (nblk) of its own: gm for q/k, gv for v/dO.
  const Geometry gw = geometry(max(d, dv)), gm = geometry(d), gv = geometry(dv);
  const int ds = gw.ds;
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

  const KeyTile tile = key_tile(seq, batch, kv_heads, BKV);
  const int g = tile.kv_head, b = tile.batch, kv0 = tile.row0, nk = tile.rows, group = heads / kv_heads;
  const int64_t tok0 = tile.tok0;
  const int* docs = doc_row(doc_starts, tok0);

  load_tile<T, NW>(ks, ds, k + (tok0 + kv0) * kv_stride + int64_t{g} * d, kv_stride, BKV, nk, d, gw.dw, 1.0f);
  load_tile<T, NW>(vs, ds, v + (tok0 + kv0) * v_stride + int64_t{g} * dv, v_stride, BKV, nk, dv, gw.dw, 1.0f);

  float ak[RM][NB * 4], av[RM][NB * 4];
#pragma unroll
  for (int i = 0; i < RM; i++)
#pragma unroll
    for (int c = 0; c < NB * 4; c++) ak[i][c] = av[i][c] = 0.0f;

  // Query tiles from the one holding the block's first key to the last one whose queries see its keys.
  const int qt0 = kv0 / BQ;
  const int n_qt = qt0 + key_block_query_tiles(docs, kv0, BKV, seq, window, BQ);
  const int wfirst = kv0 + warp * RW;  // first key row of this warp
  for (int hh = 0; hh < group; hh++) {
    const int h = g * group + hh;
    const int64_t lrow = (int64_t{b} * heads + h) * seq;
    for (int qt = qt0; qt < n_qt; qt++) {
      const int q0 = qt * BQ, nq = min(BQ, seq - q0);
      __syncthreads();  // the previous query tile is no longer read
      // Q pre-scaled by `scale`: S^T = K (scale Q)^T and dK = dS^T (scale Q).
      load_tile<T, NW>(qs, ds, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, BQ, nq, d, gw.dw, scale);
      load_tile<T, NW>(dos, ds, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, BQ, nq, dv, gw.dw, 1.0f);
      load_row_stats<NW * 32>(ls, dl, lse + lrow + q0, dvec + lrow + q0, BQ, nq);
      __syncthreads();

      float st[RM][NC], dpt[RM][NC];
#pragma unroll
      for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < NC; j++) st[i][j] = dpt[i][j] = 0.0f;
      nt_product<RM, NC>(st, ks + row0 * ds, ds, qs + cg * ds, ds, gm.dp4);
      nt_product<RM, NC>(dpt, vs + row0 * ds, ds, dos + cg * ds, ds, gv.dp4);
      int fq[NC];  // the first keys of this thread's query columns
#pragma unroll
      for (int j = 0; j < NC; j++) fq[j] = first_key(docs, q0 + j * 8 + cg, seq, window);
#pragma unroll
      for (int i = 0; i < RM; i++) {
        const int u = kv0 + row0 + i;
#pragma unroll
        for (int j = 0; j < NC; j++) {
          const int tl = j * 8 + cg, t = q0 + tl;
          const float p = (t >= u && t < seq && u < seq && u >= fq[j]) ? exp2f(st[i][j] * kLog2e - ls[tl]) : 0.0f;
          ptw[i * PS + tl] = p;
          dstw[i * PS + tl] = p * (dpt[i][j] - dl[tl]);
        }
      }
      __syncwarp();
      // Queries before the warp's first key, or past its last key's window (wfirst + RW - 1 + window - 1),
      // have p = 0; rows past nq are zero.
      const int k0 = min(max(wfirst - q0, 0) & ~3, BQ), k1 = min((nq + 3) & ~3, (wfirst + RW - 1 + window - q0 + 3) & ~3);
      if (k0 < k1) {
        nn_product<RM, NB>(av, ptw, PS, dos + cg * 4, ds, k0, k1, gv.nblk);
        nn_product<RM, NB>(ak, dstw, PS, qs + cg * 4, ds, k0, k1, gm.nblk);
      }
      __syncwarp();
    }
  }

#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int u = kv0 + row0 + i;
    if (u < seq) {
      store_row<T, RM, NB>(dk + (tok0 + u) * kv_stride + int64_t{g} * d, ak, i, cg, d, 1.0f);
      store_row<T, RM, NB>(dv_out + (tok0 + u) * v_stride + int64_t{g} * dv, av, i, cg, dv, 1.0f);
    }
  }
}

// ---- backward (3): dQ per query tile -----------------------------------------------

template <typename T, int DMAX, int RM, int NW, int BK>
__global__ void __launch_bounds__(NW * 32, 1)
    attention_dq_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        const float* __restrict__ lse, const float* __restrict__ dvec, T* __restrict__ dq, int batch, int seq,
                        int heads, int kv_heads, int d, int dv, int64_t q_stride, int64_t kv_stride, int64_t v_stride,
                        int64_t out_stride, float scale, int window, const int* __restrict__ doc_starts) {
  constexpr int RW = 4 * RM, BQ = NW * RW, NB = DMAX / 32, NC = BK / 8, PS = BK + 4;
  // Every tile has the row pitch and zero padding of the wider head size; each product
  // runs the depth (dp4) or column blocks (nblk) of its own: gm for q/k, gv for v/dO.
  const Geometry gw = geometry(max(d, dv)), gm = geometry(d), gv = geometry(dv);
  const int ds = gw.ds;
  KILN_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* dos = qs + BQ * ds;
  float* ks = dos + BQ * ds;
  float* vs = ks + BK * ds;
  float* dsm = vs + BK * ds;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rg = lane >> 3, cg = lane & 7;
  const int row0 = warp * RW + rg * RM;
  float* dsw = dsm + warp * RW * PS + rg * RM * PS;

  const QueryTile tile = query_tile(seq, batch, heads, kv_heads, BQ);
  const int h = tile.head, b = tile.batch, g = tile.kv_head, q0 = tile.row0, nq = tile.rows;
  const int64_t tok0 = tile.tok0;
  const int64_t lrow = (int64_t{b} * heads + h) * seq;
  const int* docs = doc_row(doc_starts, tok0);

  load_tile<T, NW>(qs, ds, q + (tok0 + q0) * q_stride + int64_t{h} * d, q_stride, BQ, nq, d, gw.dw, scale * kLog2e);
  load_tile<T, NW>(dos, ds, dout + (tok0 + q0) * out_stride + int64_t{h} * dv, out_stride, BQ, nq, dv, gw.dw, 1.0f);
  const T* kb = k + tok0 * kv_stride + int64_t{g} * d;
  const T* vb = v + tok0 * v_stride + int64_t{g} * dv;

  float lr[RM], dr[RM], acc[RM][NB * 4];
  int fk[RM];  // the rows' first keys
#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int t = q0 + row0 + i;
    fk[i] = first_key(docs, t, seq, window);
    lr[i] = t < seq ? lse[lrow + t] * kLog2e : 0.0f;
    dr[i] = t < seq ? dvec[lrow + t] : 0.0f;
#pragma unroll
    for (int c = 0; c < NB * 4; c++) acc[i][c] = 0.0f;
  }

  const int n_kt = (q0 + nq - 1) / BK + 1;
  const int wfirst = q0 + warp * RW, wlast = wfirst + RW - 1;  // this warp's query rows
  const int wkey = first_key(docs, wfirst, seq, window);        // the lowest first key of the warp's rows
  for (int kt = first_key_tile(docs, q0, seq, window, BK); kt < n_kt; kt++) {
    const int kv0 = kt * BK, nk = min(BK, seq - kv0);
    __syncthreads();
    load_tile<T, NW>(ks, ds, kb + int64_t{kv0} * kv_stride, kv_stride, BK, nk, d, gw.dw, 1.0f);
    load_tile<T, NW>(vs, ds, vb + int64_t{kv0} * v_stride, v_stride, BK, nk, dv, gw.dw, 1.0f);
    __syncthreads();

    float s[RM][NC], dp[RM][NC];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
      for (int j = 0; j < NC; j++) s[i][j] = dp[i][j] = 0.0f;
    nt_product<RM, NC>(s, qs + row0 * ds, ds, ks + cg * ds, ds, gm.dp4);
    nt_product<RM, NC>(dp, dos + row0 * ds, ds, vs + cg * ds, ds, gv.dp4);
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const int t = q0 + row0 + i;
#pragma unroll
      for (int j = 0; j < NC; j++) {
        const int u = kv0 + j * 8 + cg;
        const float p = (u <= t && t < seq && u < seq && u >= fk[i]) ? exp2f(s[i][j] - lr[i]) : 0.0f;
        dsw[i * PS + j * 8 + cg] = p * (dp[i][j] - dr[i]);
      }
    }
    __syncwarp();
    // Keys past the warp's last query, or before its first query's first key, have dS = 0.
    const int k0 = min(max(wkey - kv0, 0) & ~3, BK), depth = min(BK, (wlast - kv0 + 1 + 3) & ~3);
    if (k0 < depth) nn_product<RM, NB>(acc, dsw, PS, ks + cg * 4, ds, k0, depth, gm.nblk);
    __syncwarp();
  }

#pragma unroll
  for (int i = 0; i < RM; i++) {
    const int t = q0 + row0 + i;
    if (t < seq) store_row<T, RM, NB>(dq + (tok0 + t) * q_stride + int64_t{h} * d, acc, i, cg, d, scale);
  }
}

// attentionBackward: dOut, q, k, v, out, lse, dQ, dK, dV, docStarts | batch, seqLen, heads, kvHeads, headDim, vHeadDim, qRowStride,
//                    kvRowStride, vRowStride, outRowStride, scale, dtype, window
void launch_attention_backward(const KernelCall& c) {
  const Args a = read_args(c, kBackwardOperands);
  const int64_t items = int64_t{a.batch} * a.seq * a.heads;
  // D, then (KILN_ATTENTION_DQ=stored-ds, where the mma.sync kernels take it) the dS the dK/dV pass stores for the dQ pass.
  float* dvec = static_cast<float*>(c.scratch(backward_scratch_bytes(c, a)));
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

    launch("attentionBackward", attention_dot_kernel<T>, dim3(grid_stride_blocks(items, kDotWarps)), dim3(kDotWarps * 32), 0,
           c.stream, dout, out, dvec, items, a.seq, a.heads, a.dv, a.out_stride);
    if (launch_attention_backward_tensor_cores(c, dvec)) return;
    dispatch_head_dim(a, "attentionBackward", [&](auto dmax) {
      constexpr int DMAX = decltype(dmax)::value;
      const size_t ds = row_floats(a.d_max());
      {
        constexpr int RM = Config<DMAX>::kKvRM, BQ = Config<DMAX>::kKvBQ, BKV = kWarps * 4 * RM;
        const size_t smem = (2 * BKV * ds + 2 * BQ * ds + 2 * BQ + 2 * size_t{BKV} * (BQ + 4)) * sizeof(float);
        auto kernel = attention_dkdv_kernel<T, DMAX, RM, kWarps, BQ>;
        allow_shared(kernel, smem);
        const unsigned grid = ceil_div(a.seq, BKV) * static_cast<unsigned>(a.kv_heads * a.batch);
        launch("attentionBackward", kernel, dim3(grid), dim3(kWarps * 32), smem, c.stream, dout, q, k, v, lse,
               static_cast<const float*>(dvec), dk, dv, a.batch, a.seq, a.heads, a.kv_heads, a.d, a.dv, a.q_stride,
               a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
      }
      {
        constexpr int RM = Config<DMAX>::kQRM, BK = Config<DMAX>::kQBK, BQ = kWarps * 4 * RM;
        const size_t smem = (2 * BQ * ds + 2 * BK * ds + size_t{BQ} * (BK + 4)) * sizeof(float);
        auto kernel = attention_dq_kernel<T, DMAX, RM, kWarps, BK>;
        allow_shared(kernel, smem);
        const unsigned grid = ceil_div(a.seq, BQ) * static_cast<unsigned>(a.heads * a.batch);
        launch("attentionBackward", kernel, dim3(grid), dim3(kWarps * 32), smem, c.stream, dout, q, k, v, lse,
               static_cast<const float*>(dvec), dq, a.batch, a.seq, a.heads, a.kv_heads, a.d, a.dv, a.q_stride,
               a.kv_stride, a.v_stride, a.out_stride, a.scale, a.window, a.doc_starts);
      }
    });
  });
}

}  // namespace

KILN_REGISTER_KERNEL("attentionBackward", launch_attention_backward);

}  // namespace kiln
