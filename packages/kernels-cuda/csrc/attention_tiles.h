// attention_tiles.h: what the attention kernels share (attention.cu forward,
// attention_backward.cu backward): tile loads, the two register-tiled products,
// the head-dim buckets and their tile sizes, the argument record. The math, the
// memory layout and the tiling are described at the top of attention.cu.
#pragma once
#include <string>
#include <type_traits>

#include "kiln_cuda.h"
#include "runtime/raw_runtime.h"

namespace kiln {
namespace {


constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

/**
 * 2^x on the special-function unit alone (ex2.approx.ftz: one instruction; results below
 * 2^-126 flush to 0, far below anything a probability in bf16/f16 or f32 sums keeps).
 */
__device__ __forceinline__ float exp2_ftz(float x) {
#if defined(KILN_CUDA_SIM)
  const float y = exp2f(x);
  return y < 1.17549435e-38f ? 0.0f : y;
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

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

/** ls = lse * log2(e) and dl = D for rows [0, valid) of a query tile (rows of `lse`/`dvec` from its first row), zeros up to `rows`. */
template <int NT>
__device__ __forceinline__ void load_row_stats(float* ls, float* dl, const float* lse, const float* dvec, int rows, int valid) {
  for (int r = threadIdx.x; r < rows; r += NT) {
    ls[r] = r < valid ? lse[r] * kLog2e : 0.0f;
    dl[r] = r < valid ? dvec[r] : 0.0f;
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

/** The query tile a block of a (query tile, head, batch) grid owns; longest (last) tiles first. */
struct QueryTile {
  int tile, head, batch, kv_head, row0, rows;
  int64_t tok0;  // first token row of the batch item
};

__device__ __forceinline__ QueryTile query_tile(int seq, int batch, int heads, int kv_heads, int tile_rows) {
  const int n_tiles = (seq + tile_rows - 1) / tile_rows;
  const int64_t hb = int64_t{heads} * batch;
  QueryTile t;
  t.tile = n_tiles - 1 - static_cast<int>(int64_t{blockIdx.x} / hb);
  const int64_t rest = int64_t{blockIdx.x} % hb;
  t.head = static_cast<int>(rest % heads);
  t.batch = static_cast<int>(rest / heads);
  t.kv_head = t.head / (heads / kv_heads);
  t.row0 = t.tile * tile_rows;
  t.rows = min(tile_rows, seq - t.row0);
  t.tok0 = int64_t{t.batch} * seq;
  return t;
}

/** The key tile a block of a (key tile, kv head, batch) grid owns; first tiles (most query tiles to visit) first. */
struct KeyTile {
  int kv_head, batch, row0, rows;
  int64_t tok0;  // first token row of the batch item
};

__device__ __forceinline__ KeyTile key_tile(int seq, int batch, int kv_heads, int tile_rows) {
  const int64_t kb_count = int64_t{kv_heads} * batch;
  const int64_t rest = int64_t{blockIdx.x} % kb_count;
  KeyTile t;
  t.kv_head = static_cast<int>(rest % kv_heads);
  t.batch = static_cast<int>(rest / kv_heads);
  t.row0 = static_cast<int>(int64_t{blockIdx.x} / kb_count) * tile_rows;
  t.rows = min(tile_rows, seq - t.row0);
  t.tok0 = int64_t{t.batch} * seq;
  return t;
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

// ---- which keys a query sees -----------------------------------------------------
// Query t sees keys first_key(t) <= u <= t: first_key(t) = max(t - window + 1, docStarts[t])
// (packed rows; 0 without docStarts). A call whose window covers the sequence runs with
// kNoWindow, which no distance between two rows of a launch (padding rows included)
// reaches: without docStarts every test below is then false and the causal kernels run
// as before. Documents are contiguous, so first_key never decreases along a row: the
// first row of a query tile has the tile's lowest first key, its last row the highest,
// and whole tiles are skipped or masked on those two alone.
constexpr int kNoWindow = 1 << 30;

/**
 * Query t's first key; docs: the batch item's row of docStarts, or null. Rows past the
 * sequence (padding) take its last row's document, which keeps first_key non-decreasing.
 */
__host__ __device__ __forceinline__ int first_key(const int* docs, int t, int seq, int window) {
  const int w = t - window + 1;
  return docs ? max(w, docs[min(t, seq - 1)]) : w;
}

/** Key u lies before query t's first key: before its window, or before its document. */
__host__ __device__ __forceinline__ bool before_first_key(const int* docs, int t, int u, int seq, int window) {
  return t - u >= window || (docs && u < docs[min(t, seq - 1)]);
}

/** The tile (of `tile` keys) holding query q0's first key: no query from q0 on sees a key before it. */
__host__ __device__ __forceinline__ int first_key_tile(const int* docs, int q0, int seq, int window, int tile) {
  return max(first_key(docs, q0, seq, window), 0) / tile;
}

/**
 * The last query that sees key u: the queries whose first key is at most u are rows
 * 0 .. last_query(u), and those from u on see u. Without docStarts u + window - 1 (which
 * may pass the sequence's end); with them the last row t from u on (at most seq - 1)
 * with docStarts[t] <= u and t - u < window, by a binary search (docStarts never
 * decreases along a row). Keys past the sequence get its last row.
 */
__device__ __forceinline__ int last_query(const int* docs, int u, int seq, int window) {
  if (!docs) return u + window - 1;
  int lo = min(u, seq - 1), hi = min(seq - 1, u + window - 1);  // row lo sees u (or u is past the sequence)
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (docs[mid] <= u) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Query tiles (of `tile` rows) that a block of `own` keys from kv0 (a multiple of `tile`)
 * visits: from the one holding its first key to the last one holding a query that sees
 * its last key (window: that key + window - 1; the sequence's end may come first) or,
 * with docStarts, one of its keys (first keys never decrease: the tiles after it see none).
 */
__device__ __forceinline__ int key_block_query_tiles(const int* docs, int kv0, int own, int seq, int window, int tile) {
  const int qt0 = kv0 / tile, n = min((seq + tile - 1) / tile - qt0, (own + window - 2) / tile + 1);
  return docs ? min(n, last_query(docs, kv0 + own - 1, seq, window) / tile + 1 - qt0) : n;
}

/** The batch item's row of docStarts (from token row tok0), or null without docStarts. */
__device__ __forceinline__ const int* doc_row(const int* doc_starts, int64_t tok0) { return doc_starts ? doc_starts + tok0 : nullptr; }

/** d: query/key head size; dv: value/output head size (Multi-head Latent Attention: dv != d). */
struct Args {
  int batch, seq, heads, kv_heads, d, dv;
  int64_t q_stride, kv_stride, v_stride, out_stride;
  float scale;
  int dtype;
  /** Keys a query sees, its own included: the contract's window below seqLen, else kNoWindow. */
  int window;
  /** docStarts (batch x seq, i32), or null: every row one document. */
  const int* doc_starts;
  /** The wider of the two head sizes: what picks the tile bucket. */
  int d_max() const { return d > dv ? d : dv; }
};

/**
 * Operands in the contract's order, before the scalars: attentionForward q, k, v, out,
 * lse, docStarts; attentionBackward dOut, q, k, v, out, lse, dQ, dK, dV, docStarts. The
 * optional docStarts, last, is 0 when absent.
 */
constexpr int kForwardOperands = 6, kBackwardOperands = 10;

// Scalars after the operands, in src/kernel-call.ts's order: batch, seqLen, heads, kvHeads,
// headDim, vHeadDim, qRowStride, kvRowStride, vRowStride, outRowStride, scale, dtype, window
// (min(window, seqLen)).
Args read_args(const KernelCall& c, int operands) {
  const int first = operands;
  Args a;
  a.batch = c.i32(first);
  a.seq = c.i32(first + 1);
  a.heads = c.i32(first + 2);
  a.kv_heads = c.i32(first + 3);
  a.d = c.i32(first + 4);
  a.dv = c.i32(first + 5);
  a.q_stride = c.i64(first + 6);
  a.kv_stride = c.i64(first + 7);
  a.v_stride = c.i64(first + 8);
  a.out_stride = c.i64(first + 9);
  a.scale = c.f32(first + 10);
  a.dtype = c.i32(first + 11);
  const int window = c.i32(first + 12);
  a.window = window < a.seq ? window : kNoWindow;
  a.doc_starts = c.ptr<const int>(operands - 1);
  return a;
}

/**
 * The stored dS of the mma.sync backward (KILN_ATTENTION_DQ=stored-ds): for each (batch,
 * head) the 64 x 64 tiles (query tile i, key tile j) the mask reaches, j from
 * first_key_tile(64 i) to i, lying row by row: (0,0), (1,0), (1,1), (2,0), ... (the lower
 * triangle; under a window, its band of stored_ds_band tiles below the diagonal; with
 * docStarts, of row i only the tiles from first_key_tile(64 i) on are written and read). Inside
 * a tile, 16 pieces of 512 bytes (stored_ds_piece): piece (w, kk) holds dS of queries
 * 16 w.. 16 w + 15 and keys 16 kk.. 16 kk + 15, lane by lane 16 bytes each, in the order
 * the dK/dV pass's warp kk holds them (8 x 8 blocks of dS^T in mma accumulator layout;
 * the dQ pass's warp w transposes each block by movmatrix into its A fragments). Both
 * passes move a piece as one 16-byte access a lane.
 */
constexpr int kStoredDsTile = 64;
constexpr size_t kStoredDsMostBytes = size_t{512} << 20;  // past this the dQ pass recomputes dS instead

/** Key tiles before the diagonal that a query tile reaches: ceil((window - 1) / 64) (kNoWindow: more than any sequence has). */
__host__ __device__ inline int stored_ds_band(int window) { return (window - 1 + kStoredDsTile - 1) / kStoredDsTile; }

/** Stored tiles of query tiles 0 .. i - 1: row r holds min(r, band) + 1 tiles. */
__host__ __device__ inline int64_t stored_ds_rows_before(int i, int band) {
  const int64_t n = i, c = band;
  return n + (n <= c ? n * (n - 1) / 2 : c * (c - 1) / 2 + c * (n - c));
}

/** Stored tiles of one (batch, head). */
__host__ __device__ inline int64_t stored_ds_tiles(int seq, int window) {
  return stored_ds_rows_before((seq + kStoredDsTile - 1) / kStoredDsTile, stored_ds_band(window));
}

/** Bytes of the stored dS of a call (16-bit elements). */
inline size_t stored_ds_bytes(int batch, int heads, int seq, int window) {
  return static_cast<size_t>(int64_t{batch} * heads * stored_ds_tiles(seq, window)) * kStoredDsTile * kStoredDsTile * 2;
}

/**
 * Whether this backward call takes the stored dS: KILN_ATTENTION_DQ=stored-ds, the
 * mma.sync kernels (bf16/f16, heads up to 64, no other attention path asked for), and
 * at most kStoredDsMostBytes of it.
 */
inline bool stored_ds_wanted(const KernelCall& c, const Args& a) {
  return c.dq_from_stored_ds && !c.simt_attention && !c.wmma_attention && !c.wgmma_attention && (a.dtype == kBF16 || a.dtype == kF16) &&
         a.d_max() <= kStoredDsTile && stored_ds_bytes(a.batch, a.heads, a.seq, a.window) <= kStoredDsMostBytes;
}

/**
 * The backward's scratch: D (one float a query row of every head), then, where the call
 * takes it, the stored dS from the next 256-byte boundary.
 */
inline size_t stored_ds_offset_bytes(const Args& a) { return (static_cast<size_t>(int64_t{a.batch} * a.seq * a.heads) * sizeof(float) + 255) / 256 * 256; }
inline size_t backward_scratch_bytes(const KernelCall& c, const Args& a) {
  return stored_ds_wanted(c, a) ? stored_ds_offset_bytes(a) + stored_ds_bytes(a.batch, a.heads, a.seq, a.window)
                                : static_cast<size_t>(int64_t{a.batch} * a.seq * a.heads) * sizeof(float);
}
/** The stored dS in the backward's scratch that starts with D at `dvec`. */
template <typename T>
T* stored_ds_of(const float* dvec, const Args& a) {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(const_cast<float*>(dvec)) + stored_ds_offset_bytes(a));
}

/** Element offset, inside a tile, of lane `lane`'s 16 bytes of piece (queries 16 w.., keys 16 kk..). */
__device__ __forceinline__ int stored_ds_piece(int w, int kk, int lane) { return ((w * (kStoredDsTile / 16) + kk) * 32 + lane) * 8; }

/**
 * Element offset of tile (i, j) of (batch b, head h). Row i starts at tile i (i + 1) / 2 with
 * key tile 0 while i <= band; past that it starts at key tile i - band, and tile (i, j) is
 * stored_ds_rows_before(i, band) + j - (i - band) = band i - band (band - 1) / 2 + j.
 */
__device__ __forceinline__ int64_t stored_ds_offset(int b, int h, int heads, int seq, int window, int i, int j) {
  const int64_t n = i, c = stored_ds_band(window);
  const int64_t tile = j + (n <= c ? n * (n + 1) / 2 : c * n - c * (c - 1) / 2);
  return ((int64_t{b} * heads + h) * stored_ds_tiles(seq, window) + tile) * (kStoredDsTile * kStoredDsTile);
}

size_t row_floats(int d) { return static_cast<size_t>((d + 31) / 32 * 32 + 4); }

/**
 * Calls f(std::integral_constant<int, DMAX>) for the bucket holding both head sizes
 * (the register accumulators and the tile sizes follow the wider one).
 */
template <typename F>
void dispatch_head_dim(const Args& a, const char* kernel, F&& f) {
  const int d = a.d_max();
  if (d <= 32) f(std::integral_constant<int, 32>{});
  else if (d <= 64) f(std::integral_constant<int, 64>{});
  else if (d <= 128) f(std::integral_constant<int, 128>{});
  else if (d <= 256) f(std::integral_constant<int, 256>{});
  else throw DeviceFailure(std::string(kernel) + ": headDim " + std::to_string(a.d) + " and vHeadDim " + std::to_string(a.dv) + " must be at most 256");
}

}  // namespace

/** attentionForward on wgmma (attention_forward_wgmma.cu) when it applies: KILN_ATTENTION_PATH=wgmma, bf16/f16, headDim and vHeadDim <= 128, rows allowing 16-byte copies; false otherwise. */
bool launch_attention_forward_wgmma(const KernelCall& c);
/** attentionForward on mma.sync (attention_forward_mma.cu) when it applies: bf16/f16, headDim and vHeadDim <= 128, not KILN_ATTENTION_PATH=wmma; false otherwise. */
bool launch_attention_forward_mma(const KernelCall& c);
/** attentionForward on tensor cores (attention_forward_tc.cu, the mma kernel first) when it applies: bf16/f16, headDim and vHeadDim <= 128; false otherwise. */
bool launch_attention_forward_tensor_cores(const KernelCall& c);
/** dK, dV and dQ on wgmma (attention_backward_wgmma.cu) from D in `dvec`, when it applies: KILN_ATTENTION_PATH=wgmma, bf16/f16, headDim and vHeadDim <= 128, rows allowing 16-byte copies; false otherwise. */
bool launch_attention_backward_wgmma(const KernelCall& c, const float* dvec);
/** dK, dV and dQ on mma.sync (attention_backward_mma.cu) from D in `dvec`, when it applies: bf16/f16, headDim and vHeadDim <= 128, not KILN_ATTENTION_PATH=wmma; false otherwise. */
bool launch_attention_backward_mma(const KernelCall& c, const float* dvec);
/** dK, dV and dQ on tensor cores from D in `dvec` when it applies: the mma kernels (up to 128), else with KILN_ATTENTION_PATH=wmma attention_backward_tc.cu (bf16/f16, headDim and vHeadDim <= 64); false otherwise. */
bool launch_attention_backward_tensor_cores(const KernelCall& c, const float* dvec);

}  // namespace kiln
