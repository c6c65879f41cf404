/*
 * attention: fused causal scaled-dot-product attention (flash style), GQA aware,
 * optionally with a sliding window of W keys, and in packed rows of several
 * documents (doc_starts) with no query seeing a key of an earlier document.
 *
 * Math, for query head h reading kv head g = h / (heads / kv_heads):
 *   s[t,u] = scale * q[t]·k[u]  for t - W < u <= t  (W = seq_len without a window)
 *   out[t] = sum_u p[t,u] v[u],  p[t,:] = softmax(s[t,:]),  lse[t] = log sum_u exp(s[t,u])
 * Backward, with D[t] = dOut[t]·out[t] and p recomputed as exp(s - lse):
 *   dP = dOut v^T;  dS = p (dP - D);  dQ = scale dS k;  dK = scale dS^T q;  dV = p^T dOut
 * dK and dV of kv head g sum over the query heads of its group.
 * Exponentials are taken base 2 on scores pre-multiplied by log2(e) (kiln_exp2_f32x4,
 * kiln_math.h); lse is m ln2 + log(l) with the log in f64.
 *
 * Memory layout (elements of `dtype`: 0 f32, 1 bf16, 2 f16; row-major); D is the
 * query/key head size, DV the value/output head size (MLA: DV != D):
 *   q, dq:     row (b*T + t), columns [h*D, h*D + D),   rows q_stride apart
 *   out, dout: row (b*T + t), columns [h*DV, h*DV + DV), rows out_stride apart
 *   k, dk:     row (b*T + u), columns [g*D, g*D + D),   rows kv_stride apart
 *   v, dv:     row (b*T + u), columns [g*DV, g*DV + DV), rows v_stride apart
 *   lse:       f32 (batch, heads, T)
 * Only those logical elements are read or written, so q/k/v (and dq/dk/dv)
 * may be interleaved slices of one packed buffer.
 *
 * Blocking: BQ queries against BK keys at a time, in f32 copies with rows
 * padded to dpad = D (q, k rows) or vpad = DV (v, out rows) rounded up to 4
 * (zeros), so every dot product and update runs whole f32x4 vectors. Every product is one register-tiled form,
 * C(m x n) += A(m x k) B(k x n), B rows contiguous, A read one splat at a time
 * either row-major or transposed:
 *   forward:  S = Q K^T,  O += P V                   (online softmax between the two)
 *   backward: S = Q K^T,  dP = dO V^T,  dV += P^T dO,  dK += dS^T Q,  dQ += dS K
 * K^T and V^T are kept per key tile as (dpad x BK) and (vpad x BK). On tiles
 * that cross the diagonal, each row sliver skips the columns and depth the
 * causal mask removes. A window skips the key tiles wholly before it and masks
 * the keys before it inside its first tile (scores -inf, p and dS zero); a
 * document's start does the same (doc_starts is non-decreasing along a row, so a
 * query block's first query has the block's earliest first key).
 * Nothing larger than BQ x BK scores exists at once.
 *
 * Threads:
 *   forward:  units (b, h, query block) in that order, split into contiguous
 *             runs of about equal cost (key tiles); each thread converts K and V
 *             of the (b, g) it works on once, into its own scratch.
 *   backward: (b, g) pairs, contiguous runs per thread; the pair's thread walks
 *             every query head of the group, so dK/dV rows (f32 accumulators in
 *             its scratch) and dQ rows have a single writer.
 * Results do not depend on the thread count.
 *
 * Scratch: thread t owns scratch + t * scratch_stride, at least
 * kiln_attention_scratch_bytes(T, D, DV, backward) bytes, 16-byte aligned.
 */
#include "attention_io.h"
#include "kiln_math.h"

/* Register tile: MR rows x NRV f32x4 vectors (see matmul.c for the register budget). */
#if defined(KILN_RELAXED_SIMD) && KILN_RELAXED_SIMD
#define MR 3
#define NRV 3
#else
#define MR 4
#define NRV 2
#endif
#define NR (NRV * 4)

#ifndef ATTN_BQ
#define ATTN_BQ 48 /* queries per block: a multiple of 12 (every MR) */
#endif
#ifndef ATTN_BK
#define ATTN_BK 48 /* keys per tile: a multiple of 12 */
#endif
#define BQ ATTN_BQ
#define BK ATTN_BK

#define LOG2E 1.44269504088896341f
#define LN2 0.69314718055994531f

/* Host-written argument block; mirrored in src/attention-call.ts. */
typedef struct {
  int32_t batch, seq_len, heads, kv_heads, head_dim, v_head_dim;
  int32_t q_stride, kv_stride, v_stride, out_stride; /* elements between rows */
  float scale;
  int32_t dtype;
  const void* q;
  const void* k;
  const void* v;
  void* out;          /* forward: written; backward: read */
  float* lse;         /* forward: written; backward: read */
  const void* d_out;  /* backward only */
  void* d_q;
  void* d_k;
  void* d_v;
  uint8_t* scratch;
  uint32_t scratch_stride; /* bytes */
  int32_t window;          /* keys each query sees, 1..seq_len */
  const int32_t* doc_starts; /* (batch, seq_len): where each token's document begins in its row; null: one document a row */
} AttentionArgs;

KILN_INLINE int round_up(int x, int m) { return (x + m - 1) / m * m; }
KILN_INLINE int clamp(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

/* ---- register tile ------------------------------------------------------ */

/*
 * C(MR x 4nv) = (keep ? C : 0) + sum_p A(r, p) * b[p][0..4nv), A(r, p) = a[r * ars + p * aps];
 * b rows ldb floats apart.
 */
KILN_INLINE void tile(int nv, int kc, const float* restrict a, int ars, int aps, const float* restrict b, int ldb,
                      float* restrict c, int ldc, int keep) {
  v128_t acc[MR][NRV];
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < nv; v++) acc[r][v] = keep ? wasm_v128_load(c + r * ldc + 4 * v) : wasm_f32x4_splat(0.0f);
  for (int p = 0; p < kc; p++) {
    v128_t bv[NRV];
    for (int v = 0; v < nv; v++) bv[v] = wasm_v128_load(b + 4 * v);
    for (int r = 0; r < MR; r++) {
      const v128_t av = wasm_v128_load32_splat(a + r * ars);
      for (int v = 0; v < nv; v++) acc[r][v] = KILN_MADD(acc[r][v], av, bv[v]);
    }
    a += aps;
    b += ldb;
  }
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < nv; v++) wasm_v128_store(c + r * ldc + 4 * v, acc[r][v]);
}

/*
 * One copy per width and A orientation: rows (A row-major, aps = 1) or columns
 * (A transposed, ars = 1). Kept out of line (like gemm and the row passes):
 * inlined, everything folds into two huge entry functions whose register
 * allocation in V8 halves the speed of the backward.
 */
#define NOINLINE __attribute__((noinline))
#define TILE_ARGS int kc, const float *restrict a, int lda, const float *restrict b, int ldb, float *restrict c, int ldc, int keep
static NOINLINE void tile_rows_full(TILE_ARGS) { tile(NRV, kc, a, lda, 1, b, ldb, c, ldc, keep); }
static NOINLINE void tile_rows_1(TILE_ARGS) { tile(1, kc, a, lda, 1, b, ldb, c, ldc, keep); }
static NOINLINE void tile_cols_full(TILE_ARGS) { tile(NRV, kc, a, 1, lda, b, ldb, c, ldc, keep); }
static NOINLINE void tile_cols_1(TILE_ARGS) { tile(1, kc, a, 1, lda, b, ldb, c, ldc, keep); }
#if NRV > 2
static NOINLINE void tile_rows_2(TILE_ARGS) { tile(2, kc, a, lda, 1, b, ldb, c, ldc, keep); }
static NOINLINE void tile_cols_2(TILE_ARGS) { tile(2, kc, a, 1, lda, b, ldb, c, ldc, keep); }
#endif

/* Which part of a product the causal mask keeps; delta = first query - first key of the tile. */
enum {
  FULL,       /* everything */
  KEY_COLS,   /* rows are queries, columns keys: row i needs keys j <= i + delta */
  KEY_DEPTH,  /* rows are queries, depth keys: same limit on the depth */
  QUERY_DEPTH /* rows are keys, depth queries: row j needs queries i >= j - delta */
};

/*
 * C(m x n) = (keep ? C : 0) + A(m x kc) B(kc x n), restricted per row sliver
 * by `causal`. m is a multiple of MR, n of 4. A is row-major with rows lda
 * apart, or (transposed) stored (kc x m) with rows lda apart.
 */
static NOINLINE void gemm(int m, int n, int kc, const float* a, int lda, int transposed, const float* b, int ldb,
                          float* c, int ldc, int keep, int causal, int delta) {
  for (int s = 0; s < m; s += MR) {
    int cols = n, p0 = 0, p1 = kc;
    if (causal == KEY_COLS) cols = clamp(round_up(kiln_max(s + MR + delta, 0), 4), 0, n);
    else if (causal == KEY_DEPTH) p1 = clamp(s + MR + delta, 0, kc);
    else if (causal == QUERY_DEPTH) p0 = clamp(s - delta, 0, kc);
    const int depth = kiln_max(p1 - p0, 0);
    const float* as = transposed ? a + (size_t)p0 * lda + s : a + (size_t)s * lda + p0;
    const float* bs = b + (size_t)p0 * ldb;
    float* cs = c + (size_t)s * ldc;
    int j = 0;
    if (transposed) {
      for (; j + NR <= cols; j += NR) tile_cols_full(depth, as, lda, bs + j, ldb, cs + j, ldc, keep);
      switch ((cols - j) >> 2) {
        case 1: tile_cols_1(depth, as, lda, bs + j, ldb, cs + j, ldc, keep); break;
#if NRV > 2
        case 2: tile_cols_2(depth, as, lda, bs + j, ldb, cs + j, ldc, keep); break;
#endif
        default: break;
      }
    } else {
      for (; j + NR <= cols; j += NR) tile_rows_full(depth, as, lda, bs + j, ldb, cs + j, ldc, keep);
      switch ((cols - j) >> 2) {
        case 1: tile_rows_1(depth, as, lda, bs + j, ldb, cs + j, ldc, keep); break;
#if NRV > 2
        case 2: tile_rows_2(depth, as, lda, bs + j, ldb, cs + j, ldc, keep); break;
#endif
        default: break;
      }
    }
  }
}

KILN_INLINE float hmax(v128_t v) {
  v = wasm_f32x4_max(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_f32x4_max(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(v, 0);
}

KILN_INLINE float hsum(v128_t v) {
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(v, 0);
}

/* Lanes j..j+3 below `limit`: all ones, else zero. */
KILN_INLINE v128_t lanes_below(int j, int limit) {
  return wasm_i32x4_lt(wasm_i32x4_add(wasm_i32x4_splat(j), wasm_i32x4_make(0, 1, 2, 3)), wasm_i32x4_splat(limit));
}

KILN_INLINE void zero_floats(float* p, size_t n) {
  for (size_t i = 0; i < n; i += 4) wasm_v128_store(p + i, wasm_f32x4_splat(0.0f));
}

/* ---- scratch --------------------------------------------------------------- */

/*
 * Floats of each region, every one a multiple of 4 so each starts 16-byte aligned.
 * `wpad` is the wider of dpad and vpad: every region holds rows of either.
 */
typedef struct {
  size_t row, block, vec, tile, keys;
  int key_arrays; /* forward: K^T, V; backward: K, K^T, V^T, dK, dV */
} Sizes;

static Sizes sizes(int seq_len, int wpad, int backward) {
  Sizes z;
  z.row = (size_t)wpad;
  z.block = (size_t)BQ * wpad;
  z.vec = BQ;
  z.tile = (size_t)BQ * BK;
  z.keys = (size_t)round_up(seq_len, BK) * wpad;
  z.key_arrays = backward ? 5 : 2;
  return z;
}

/* row, 3 blocks (Q, dO, O/dQ), 2 vectors (m/D, l/lse), 2 tiles (S/P, dP/dS), the key arrays. */
static uint64_t total_floats(const Sizes* z) {
  return z->row + 3 * (uint64_t)z->block + 2 * z->vec + 2 * (uint64_t)z->tile + (uint64_t)z->key_arrays * z->keys;
}

KILN_EXPORT(kiln_attention_scratch_bytes)
uint32_t kiln_attention_scratch_bytes(int seq_len, int head_dim, int v_head_dim, int backward) {
  const Sizes z = sizes(seq_len, round_up(kiln_max(head_dim, v_head_dim), 4), backward);
  const uint64_t bytes = total_floats(&z) * sizeof(float);
  return bytes > 0xffffffffu ? 0xffffffffu : (uint32_t)bytes;
}

/* Queries per forward work unit (the host caps the threads it wakes by the unit count). */
KILN_EXPORT(kiln_attention_block_queries)
uint32_t kiln_attention_block_queries(void) { return BQ; }

typedef struct {
  float* row;                /* one converted row */
  float *q, *dout, *o;       /* Q (BQ x dpad; forward: times scale log2 e), dO (BQ x vpad), output (x vpad) / dQ (x dpad) accumulator */
  float *m, *l;              /* forward: running max (log2 units) and sum; backward: D and lse log2 e */
  float *s, *dp;             /* (BQ x BK): S then P in place; dP then dS in place */
  float *kt, *v, *k, *vt, *dk, *dv; /* round_up(T, BK) rows each: K, dK x dpad; V, dV x vpad; K^T (dpad x BK) and V^T (vpad x BK) tiles */
} Work;

static Work work_at(uint8_t* base, int seq_len, int wpad, int backward) {
  const Sizes z = sizes(seq_len, wpad, backward);
  float* f = (float*)base;
  Work w;
  w.row = f; f += z.row;
  w.q = f; f += z.block;
  w.dout = f; f += z.block;
  w.o = f; f += z.block;
  w.m = f; f += z.vec;
  w.l = f; f += z.vec;
  w.s = f; f += z.tile;
  w.dp = f; f += z.tile;
  w.kt = f; f += z.keys;
  if (backward) {
    w.v = 0;
    w.vt = f; f += z.keys;
    w.k = f; f += z.keys;
    w.dk = f; f += z.keys;
    w.dv = f;
  } else {
    w.v = f;
    w.vt = w.k = w.dk = w.dv = 0;
  }
  return w;
}

/* ---- shared pieces ------------------------------------------------------ */

typedef struct {
  int T, W, D, dpad, DV, vpad, wpad, group;
  size_t q_stride, kv_stride, v_stride, out_stride;
} Dims;

static Dims dims_of(const AttentionArgs* a) {
  Dims d;
  d.T = a->seq_len;
  d.W = a->window;
  d.D = a->head_dim;
  d.dpad = round_up(a->head_dim, 4);
  d.DV = a->v_head_dim;
  d.vpad = round_up(a->v_head_dim, 4);
  d.wpad = kiln_max(d.dpad, d.vpad);
  d.group = a->heads / a->kv_heads;
  d.q_stride = (size_t)a->q_stride;
  d.kv_stride = (size_t)a->kv_stride;
  d.v_stride = (size_t)a->v_stride;
  d.out_stride = (size_t)a->out_stride;
  return d;
}

/*
 * mul * rows q0.. of head h of `src` (rows `stride` apart, heads `n` wide) into `dst`
 * (mq x npad), zero rows past nq.
 */
static void load_query_block(const void* src, size_t stride, int n, int npad, int dtype, const Dims* d, int b, int h, int q0,
                             int nq, int mq, float mul, float* dst) {
  for (int i = 0; i < mq; i++) {
    float* row = dst + (size_t)i * npad;
    if (i >= nq) {
      zero_floats(row, (size_t)npad);
      continue;
    }
    attn_load_row(src, ((size_t)b * d->T + q0 + i) * stride + (size_t)h * n, n, dtype, row, npad);
    if (mul != 1.0f) {
      const v128_t vm = wasm_f32x4_splat(mul);
      for (int c = 0; c < npad; c += 4) wasm_v128_store(row + c, wasm_f32x4_mul(wasm_v128_load(row + c), vm));
    }
  }
}

/* Key row u of `src` (kv head g; rows `stride` apart, heads `n` wide) into `row` (npad floats), zeros past T. */
static void load_key_row(const void* src, size_t stride, int n, int npad, int dtype, const Dims* d, int b, int g, int u, float* row) {
  if (u < d->T) attn_load_row(src, ((size_t)b * d->T + u) * stride + (size_t)g * n, n, dtype, row, npad);
  else zero_floats(row, (size_t)npad);
}

/* row (npad floats) as column u % BK of key tile u / BK in (npad x BK) tiles. */
static void put_transposed(const float* row, int npad, int u, float* tiles) {
  float* col = tiles + (size_t)(u / BK) * npad * BK + u % BK;
  for (int c = 0; c < npad; c++) col[(size_t)c * BK] = row[c];
}

/* First key tile a block of queries from q0 needs: the one holding q0's first key (cost estimates: without documents). */
KILN_INLINE int first_tile(const Dims* d, int q0) { return kiln_max(q0 - d->W + 1, 0) / BK; }

/* The first key query q of row b sees: its window's first, or its document's start when later. */
KILN_INLINE int first_key(const AttentionArgs* a, const Dims* d, int b, int q) {
  const int lo = kiln_max(q - d->W + 1, 0);
  return a->doc_starts ? kiln_max(lo, a->doc_starts[(size_t)b * d->T + q]) : lo;
}

/* Key tiles a block of queries from q0 reads. */
KILN_INLINE int block_tiles(const Dims* d, int q0) {
  return (kiln_min(q0 + BQ, d->T) - 1) / BK + 1 - first_tile(d, q0);
}

/* ---- forward ----------------------------------------------------------------- */

/* Which (b, g) a thread's converted K^T / V hold, and how many keys. */
typedef struct {
  int b, g, keys;
} KvCache;

static void forward_keys(const AttentionArgs* a, const Dims* d, Work* w, KvCache* cache, int b, int g, int keys) {
  if (cache->b != b || cache->g != g) {
    cache->b = b;
    cache->g = g;
    cache->keys = 0;
  }
  for (int u = cache->keys; u < keys; u++) {
    load_key_row(a->k, d->kv_stride, d->D, d->dpad, a->dtype, d, b, g, u, w->row);
    put_transposed(w->row, d->dpad, u, w->kt);
    load_key_row(a->v, d->v_stride, d->DV, d->vpad, a->dtype, d, b, g, u, w->v + (size_t)u * d->vpad);
  }
  if (keys > cache->keys) cache->keys = keys;
}

/*
 * Online softmax over one tile for row i (scores in log2 units): updates the
 * running max m and sum l, rescales the output row, and turns the row of S
 * into p in place, zero before `lo` (the window's first key) and from `valid`
 * on (up to BK).
 */
static NOINLINE void softmax_tile_row(Work* w, const Dims* d, int i, int lo, int valid) {
  float* srow = w->s + (size_t)i * BK;
  const v128_t neg_inf = wasm_f32x4_splat(-__builtin_inff());
  for (int j = 0; j < lo; j += 4) wasm_v128_store(srow + j, wasm_v128_bitselect(neg_inf, wasm_v128_load(srow + j), lanes_below(j, lo)));
  const int full = valid & ~3;
  v128_t vmax = neg_inf;
  /* pmax (one instruction; max is several): a NaN score may be left out of the max, but
   * its own 2^(s - max) is NaN, so the row's sum and output still come out NaN. */
  for (int j = 0; j < full; j += 4) vmax = wasm_f32x4_pmax(wasm_v128_load(srow + j), vmax);
  if (full < valid) {
    const v128_t tail = wasm_v128_bitselect(wasm_v128_load(srow + full), neg_inf, lanes_below(full, valid));
    wasm_v128_store(srow + full, tail);
    vmax = wasm_f32x4_pmax(tail, vmax);
  }
  const float m_old = w->m[i];
  const float tile_max = hmax(vmax);
  const float m_new = m_old > tile_max ? m_old : tile_max;
  const v128_t vm = wasm_f32x4_splat(m_new);
  v128_t vsum = wasm_f32x4_splat(0.0f);
  const int end = round_up(valid, 4);
  for (int j = 0; j < end; j += 4) {
    const v128_t p = kiln_exp2_f32x4(wasm_f32x4_sub(wasm_v128_load(srow + j), vm));
    vsum = wasm_f32x4_add(vsum, p);
    wasm_v128_store(srow + j, p);
  }
  zero_floats(srow + end, (size_t)(BK - end));
  const float alpha = kiln_exp2_f32(m_old - m_new);
  w->l[i] = w->l[i] * alpha + hsum(vsum);
  w->m[i] = m_new;
  if (alpha != 1.0f) {
    float* orow = w->o + (size_t)i * d->vpad;
    const v128_t va = wasm_f32x4_splat(alpha);
    for (int c = 0; c < d->vpad; c += 4) wasm_v128_store(orow + c, wasm_f32x4_mul(wasm_v128_load(orow + c), va));
  }
}

static void forward_block(const AttentionArgs* a, const Dims* d, Work* w, KvCache* cache, int b, int h, int q0) {
  const int nq = kiln_min(BQ, d->T - q0), mq = round_up(nq, MR);
  const int t0 = first_key(a, d, b, q0) / BK, tiles = (q0 + nq - 1) / BK + 1;
  forward_keys(a, d, w, cache, b, h / d->group, tiles * BK);
  load_query_block(a->q, d->q_stride, d->D, d->dpad, a->dtype, d, b, h, q0, nq, mq, a->scale * LOG2E, w->q);
  for (int i = 0; i < mq; i++) {
    w->m[i] = -__builtin_inff();
    w->l[i] = 0.0f;
  }
  zero_floats(w->o, (size_t)mq * d->vpad);

  for (int t = t0; t < tiles; t++) {
    const int k0 = t * BK, kn = kiln_min(BK, d->T - k0), delta = q0 - k0;
    gemm(mq, round_up(kn, 4), d->dpad, w->q, d->dpad, 0, w->kt + (size_t)t * d->dpad * BK, BK, w->s, BK, 0, KEY_COLS, delta);
    for (int i = 0; i < mq; i++) {
      /* Row i sees this tile's keys [lo, valid): from its window's (or document's) start, up to its own position. */
      const int lo = i < nq ? kiln_max(first_key(a, d, b, q0 + i) - k0, 0) : 0;
      const int valid = i < nq ? kiln_min(kn, i + delta + 1) : 0;
      if (valid > lo) softmax_tile_row(w, d, i, lo, valid);
      else zero_floats(w->s + (size_t)i * BK, BK);
    }
    gemm(mq, d->vpad, kn, w->s, BK, 0, w->v + (size_t)k0 * d->vpad, d->vpad, w->o, d->vpad, 1, KEY_DEPTH, delta);
  }

  for (int i = 0; i < nq; i++) {
    const size_t row = (size_t)b * d->T + q0 + i;
    attn_store_row(a->out, row * d->out_stride + (size_t)h * d->DV, d->DV, a->dtype, w->o + (size_t)i * d->vpad, 1.0f / w->l[i]);
    a->lse[((size_t)b * a->heads + h) * d->T + q0 + i] = w->m[i] * LN2 + (float)kiln_log(w->l[i]);
  }
}

KILN_EXPORT(kiln_attention_forward)
void kiln_attention_forward(const AttentionArgs* a, int thread, int nthreads) {
  const Dims d = dims_of(a);
  Work w = work_at(a->scratch + (size_t)thread * a->scratch_stride, d.T, d.wpad, 0);
  KvCache cache = {-1, -1, 0};
  const int blocks = (d.T + BQ - 1) / BQ;
  /* Cost of a unit = its key tiles; a unit belongs to the thread whose share holds its midpoint. */
  uint64_t per_head = 0;
  for (int qb = 0; qb < blocks; qb++) per_head += (uint64_t)block_tiles(&d, qb * BQ);
  const uint64_t total = per_head * (uint64_t)a->batch * (uint64_t)a->heads;
  uint64_t before = 0;
  for (int b = 0; b < a->batch; b++) {
    for (int h = 0; h < a->heads; h++) {
      for (int qb = 0; qb < blocks; qb++) {
        const uint64_t cost = (uint64_t)block_tiles(&d, qb * BQ);
        const uint64_t owner = ((2 * before + cost) * (uint64_t)nthreads) / (2 * total);
        before += cost;
        if ((int)owner == thread) forward_block(a, &d, &w, &cache, b, h, qb * BQ);
      }
    }
  }
}

/* ---- backward ---------------------------------------------------------------- */

/* K (row-major and K^T tiles) and V^T tiles of pair (b, g), all keys; zeroed dK/dV accumulators. */
static void backward_keys(const AttentionArgs* a, const Dims* d, Work* w, int b, int g) {
  const int keys = round_up(d->T, BK);
  for (int u = 0; u < keys; u++) {
    float* krow = w->k + (size_t)u * d->dpad;
    load_key_row(a->k, d->kv_stride, d->D, d->dpad, a->dtype, d, b, g, u, krow);
    put_transposed(krow, d->dpad, u, w->kt);
    load_key_row(a->v, d->v_stride, d->DV, d->vpad, a->dtype, d, b, g, u, w->row);
    put_transposed(w->row, d->vpad, u, w->vt);
  }
  zero_floats(w->dk, (size_t)keys * d->dpad);
  zero_floats(w->dv, (size_t)keys * d->vpad);
}

/*
 * Row i of a tile: p = 2^(S c - lse log2 e) over S in place, dS = p (dP - D)
 * over dP in place, both zero before `lo` and from `valid` on (up to BK).
 */
static NOINLINE void gradient_tile_row(Work* w, int i, int lo, int valid, float c) {
  float* srow = w->s + (size_t)i * BK;
  float* dprow = w->dp + (size_t)i * BK;
  const v128_t vc = wasm_f32x4_splat(c), vlse = wasm_f32x4_splat(w->l[i]), vd = wasm_f32x4_splat(w->m[i]);
  const int end = round_up(valid, 4);
  for (int j = 0; j < end; j += 4) {
    v128_t p = kiln_exp2_f32x4(wasm_f32x4_sub(wasm_f32x4_mul(wasm_v128_load(srow + j), vc), vlse));
    if (j + 4 > valid) p = wasm_v128_and(p, lanes_below(j, valid));
    if (j < lo) p = wasm_v128_andnot(p, lanes_below(j, lo));
    wasm_v128_store(srow + j, p);
    wasm_v128_store(dprow + j, wasm_f32x4_mul(p, wasm_f32x4_sub(wasm_v128_load(dprow + j), vd)));
  }
  zero_floats(srow + end, (size_t)(BK - end));
  zero_floats(dprow + end, (size_t)(BK - end));
}

static void backward_block(const AttentionArgs* a, const Dims* d, Work* w, int b, int h, int q0) {
  const int nq = kiln_min(BQ, d->T - q0), mq = round_up(nq, MR);
  const int t0 = first_key(a, d, b, q0) / BK, tiles = (q0 + nq - 1) / BK + 1;
  const float c = a->scale * LOG2E;
  load_query_block(a->q, d->q_stride, d->D, d->dpad, a->dtype, d, b, h, q0, nq, mq, 1.0f, w->q);
  load_query_block(a->d_out, d->out_stride, d->DV, d->vpad, a->dtype, d, b, h, q0, nq, mq, 1.0f, w->dout);
  for (int i = 0; i < mq; i++) {
    float dot = 0.0f, lse = 0.0f;
    if (i < nq) {
      const size_t row = (size_t)b * d->T + q0 + i;
      attn_load_row(a->out, row * d->out_stride + (size_t)h * d->DV, d->DV, a->dtype, w->row, d->vpad);
      const float* dorow = w->dout + (size_t)i * d->vpad;
      v128_t acc = wasm_f32x4_splat(0.0f);
      for (int k = 0; k < d->vpad; k += 4) acc = KILN_MADD(acc, wasm_v128_load(dorow + k), wasm_v128_load(w->row + k));
      dot = hsum(acc);
      lse = a->lse[((size_t)b * a->heads + h) * d->T + q0 + i] * LOG2E;
    }
    w->m[i] = dot;
    w->l[i] = lse;
  }
  zero_floats(w->o, (size_t)mq * d->dpad);

  for (int t = t0; t < tiles; t++) {
    const int k0 = t * BK, kn = kiln_min(BK, d->T - k0), mk = round_up(kn, MR), delta = q0 - k0;
    const float* kt = w->kt + (size_t)t * d->dpad * BK;
    const float* vt = w->vt + (size_t)t * d->vpad * BK;
    gemm(mq, round_up(kn, 4), d->dpad, w->q, d->dpad, 0, kt, BK, w->s, BK, 0, KEY_COLS, delta);
    gemm(mq, round_up(kn, 4), d->vpad, w->dout, d->vpad, 0, vt, BK, w->dp, BK, 0, KEY_COLS, delta);
    for (int i = 0; i < mq; i++) {
      const int lo = i < nq ? kiln_max(first_key(a, d, b, q0 + i) - k0, 0) : 0;
      const int valid = i < nq ? kiln_min(kn, i + delta + 1) : 0;
      if (valid > lo) {
        gradient_tile_row(w, i, lo, valid, c);
      } else {
        zero_floats(w->s + (size_t)i * BK, BK);
        zero_floats(w->dp + (size_t)i * BK, BK);
      }
    }
    gemm(mk, d->vpad, nq, w->s, BK, 1, w->dout, d->vpad, w->dv + (size_t)k0 * d->vpad, d->vpad, 1, QUERY_DEPTH, delta);
    gemm(mk, d->dpad, nq, w->dp, BK, 1, w->q, d->dpad, w->dk + (size_t)k0 * d->dpad, d->dpad, 1, QUERY_DEPTH, delta);
    gemm(mq, d->dpad, kn, w->dp, BK, 0, w->k + (size_t)k0 * d->dpad, d->dpad, w->o, d->dpad, 1, KEY_DEPTH, delta);
  }

  for (int i = 0; i < nq; i++) {
    const size_t row = (size_t)b * d->T + q0 + i;
    attn_store_row(a->d_q, row * d->q_stride + (size_t)h * d->D, d->D, a->dtype, w->o + (size_t)i * d->dpad, a->scale);
  }
}

KILN_EXPORT(kiln_attention_backward)
void kiln_attention_backward(const AttentionArgs* a, int thread, int nthreads) {
  const Dims d = dims_of(a);
  Work w = work_at(a->scratch + (size_t)thread * a->scratch_stride, d.T, d.wpad, 1);
  const int pairs = a->batch * a->kv_heads;
  const int first = (int)((int64_t)pairs * thread / nthreads), last = (int)((int64_t)pairs * (thread + 1) / nthreads);
  for (int pair = first; pair < last; pair++) {
    const int b = pair / a->kv_heads, g = pair % a->kv_heads;
    backward_keys(a, &d, &w, b, g);
    for (int h = g * d.group; h < (g + 1) * d.group; h++)
      for (int q0 = 0; q0 < d.T; q0 += BQ) backward_block(a, &d, &w, b, h, q0);
    for (int u = 0; u < d.T; u++) {
      const size_t row = (size_t)b * d.T + u;
      attn_store_row(a->d_k, row * d.kv_stride + (size_t)g * d.D, d.D, a->dtype, w.dk + (size_t)u * d.dpad, a->scale);
      attn_store_row(a->d_v, row * d.v_stride + (size_t)g * d.DV, d.DV, a->dtype, w.dv + (size_t)u * d.vpad, 1.0f);
    }
  }
}
