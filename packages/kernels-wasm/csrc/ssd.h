/*
 * ssd: what ssdScanForward (csrc/ssd.c) and ssdScanBackward (csrc/ssd_backward.c) share,
 * and Mamba3's scan (csrc/mamba3.h) with them: the argument block, the dimensions, each
 * export's thread split and dtype dispatch, each thread's scratch layout, the head's
 * constants, the scalar softplus / sigmoid, the chunk's dt and running sum of dt·A, the
 * reduction of the backward's parameter gradients, and row loads, stores, dot products
 * and axpys on f32x4 lanes. The chunk's work itself: csrc/ssd_chunk.h.
 *
 * Every row copied into scratch (x, dy, B, C, states) is padded with zeros to a
 * multiple of 4 floats (P4, N4), so the vector loops run over whole vectors and the
 * padding lanes stay 0 in every sum.
 */
#ifndef KILN_SSD_H
#define KILN_SSD_H

#include "kiln_math.h"
#include "kiln_storage.h"

/* Host-written argument block; mirrored in src/ssd-args.ts. */
typedef struct {
  const void* x;
  const void* dt;
  const void* dt_bias;
  const void* a_log;
  const void* b;
  const void* c;
  const void* d;
  void* y;
  float* states;
  const void* dy;
  void* dx;
  void* ddt;
  void* db;
  void* dc;
  void* ddt_bias;
  void* da_log;
  void* dd;
  float* scratch;   /* thread t: scratch + t * scratch_stride floats */
  float* partials;  /* backward: (batch, heads, 3) f32: dDtBias, dALog, dD of each (b, h) */
  int32_t scratch_stride;
  int32_t batch, seq_len, heads, head_dim, groups, state_size, chunk_size;
  int32_t x_stride, dt_stride, bc_stride;
  int32_t dtype;
  int32_t grad_dtype; /* backward: dDtBias, dALog, dD in dtype or KILN_DT_F32 */
} SsdArgs;

typedef struct {
  size_t L, H, P, N, Q, G, hpg, chunks;
  size_t P4, N4, Q4;
  size_t xs, ds, bs; /* row strides of x, dt, B / C */
} SsdDims;

#define SSD_R4(n) (((n) + 3) / 4 * 4)

KILN_INLINE SsdDims ssd_dims(const SsdArgs* a) {
  SsdDims d;
  d.L = (size_t)a->seq_len;
  d.H = (size_t)a->heads;
  d.P = (size_t)a->head_dim;
  d.N = (size_t)a->state_size;
  d.Q = (size_t)a->chunk_size;
  d.G = (size_t)a->groups;
  d.hpg = d.H / d.G;
  d.chunks = (d.L + d.Q - 1) / d.Q;
  d.P4 = SSD_R4(d.P);
  d.N4 = SSD_R4(d.N);
  d.Q4 = SSD_R4(d.Q);
  d.xs = (size_t)a->x_stride;
  d.ds = (size_t)a->dt_stride;
  d.bs = (size_t)a->bc_stride;
  return d;
}

/* The dimensions a thread's scratch depends on (one head, one group): the *_scratch_floats exports'. */
KILN_INLINE SsdDims ssd_scratch_dims(int seq_len, int head_dim, int state_size, int chunk_size) {
  SsdArgs a = {0};
  a.seq_len = seq_len;
  a.heads = a.groups = 1;
  a.head_dim = head_dim;
  a.state_size = state_size;
  a.chunk_size = chunk_size;
  return ssd_dims(&a);
}

/* Tokens of the chunk starting at t0: Q, or what is left of the sequence. */
KILN_INLINE size_t ssd_chunk_len(const SsdDims* d, size_t t0) { return d->L - t0 < d->Q ? d->L - t0 : d->Q; }

/*
 * An export's body: this thread's range [i0, i1) of `count` work items and its scratch block w,
 * then range(args, i0, i1, w, dtype) with the storage dtype a constant, so each dtype gets its own
 * inlined copy. s is the SsdArgs inside args.
 */
#define SSD_RUN_RANGE(range, args, s, count, thread, nthreads)                      \
  do {                                                                              \
    size_t i0_, i1_;                                                                \
    kiln_split((count), 1, (thread), (nthreads), &i0_, &i1_);                       \
    if (i0_ >= i1_) break;                                                          \
    float* w_ = (s)->scratch + (size_t)(thread) * (size_t)(s)->scratch_stride;      \
    switch ((s)->dtype) {                                                           \
      case KILN_DT_F32: range((args), i0_, i1_, w_, KILN_DT_F32); break;            \
      case KILN_DT_BF16: range((args), i0_, i1_, w_, KILN_DT_BF16); break;          \
      default: range((args), i0_, i1_, w_, KILN_DT_F16); break;                     \
    }                                                                               \
  } while (0)

/*
 * The backward's parameter gradients: partials is (batch, heads, M) f32 with M = 3 + nrows N per
 * (b, h): dDtBias, dALog, dD, then nrows rows of N (Mamba3's dBBias, dCBias). Each output, at h or
 * at (h, n) of its row, += the sum over b (ascending) of its partials, in f32, added once. Threads
 * take ranges of heads.
 */
KILN_INLINE void ssd_param_reduce(const SsdArgs* a, void* const* rows, size_t nrows, int thread, int nthreads) {
  size_t h0, h1;
  const size_t H = (size_t)a->heads, B = (size_t)a->batch, N = (size_t)a->state_size, M = 3 + nrows * N;
  kiln_split(H, 1, thread, nthreads, &h0, &h1);
  const int gt = a->grad_dtype;
  void* const head_outs[3] = {a->ddt_bias, a->da_log, a->dd};
  for (size_t h = h0; h < h1; h++) {
    for (size_t j = 0; j < M; j++) {
      float s = 0.0f;
      for (size_t b = 0; b < B; b++) s += a->partials[(b * H + h) * M + j];
      void* const out = j < 3 ? head_outs[j] : rows[(j - 3) / N];
      const size_t at = j < 3 ? h : h * N + (j - 3) % N;
      kiln_store1(out, at, kiln_load1(out, at, gt) + s, gt);
    }
  }
}

/* ---- scalar math ------------------------------------------------------------- */

/* softplus(v) = v past 20, else log1p(exp(v)) (its series when exp(v) is tiny). */
KILN_INLINE float ssd_softplus(float v) {
  if (v > 20.0f) return v;
  const float e = kiln_exp_f32(v);
  if (e < 1e-4f) return e * (1.0f - e * (0.5f - e * (1.0f / 3.0f)));
  return (float)kiln_log(1.0 + (double)e);
}

/* softplus' derivative: 1 past 20. */
KILN_INLINE float ssd_sigmoid(float v) { return v > 20.0f ? 1.0f : 1.0f / (1.0f + kiln_exp_f32(-v)); }

/* Head h's constants: A = -exp(aLog[h]), dtBias[h] and D[h]. */
typedef struct {
  float A, bias, Dh;
} SsdHead;

KILN_INLINE SsdHead ssd_head(const SsdArgs* a, size_t h, const int dtc) {
  SsdHead hd;
  hd.A = -kiln_exp_f32(kiln_load1(a->a_log, h, dtc));
  hd.bias = kiln_load1(a->dt_bias, h, dtc);
  hd.Dh = kiln_load1(a->d, h, dtc);
  return hd;
}

/*
 * Tokens [t0, t0 + len) of (b, h): dt[i] = softplus(dtRaw + bias), lam[i] = sum_{r <= i} dt[r]·A
 * (the running sum inside the chunk), sig[i] = softplus'(dtRaw + bias) when sig is not NULL.
 * Entries [len, Q4) hold dt = 0 and lam = lam[len - 1].
 */
KILN_INLINE void ssd_chunk_dt(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, size_t t0, size_t len, float bias, float A,
                              float* dt, float* lam, float* sig, const int dtc) {
  float run = 0.0f;
  for (size_t i = 0; i < d->Q4; i++) {
    if (i < len) {
      const float v = kiln_load1(a->dt, (b * d->L + t0 + i) * d->ds + h, dtc) + bias;
      dt[i] = ssd_softplus(v);
      run += dt[i] * A;
      lam[i] = run;
      if (sig) sig[i] = ssd_sigmoid(v);
    } else {
      dt[i] = 0.0f;
      lam[i] = run;
      if (sig) sig[i] = 0.0f;
    }
  }
}

/* ---- rows -------------------------------------------------------------------- */

/* Elements [i, i + n) of src as f32 into dst[0, n), zeros up to the next multiple of 4. */
KILN_INLINE void ssd_load_row(float* dst, const void* src, size_t i, size_t n, const int dtc) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) wasm_v128_store(dst + k, kiln_load4(src, i + k, dtc));
  if (k < n) wasm_v128_store(dst + k, kiln_load_partial(src, i + k, n - k, dtc, 0.0f));
}

/* src[0, n) into elements [i, i + n) of dst, rounded to the dtype; nothing past them. */
KILN_INLINE void ssd_store_row(void* dst, size_t i, const float* src, size_t n, const int dtc) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) kiln_store4(dst, i + k, wasm_v128_load(src + k), dtc);
  if (k < n) kiln_store_partial(dst, i + k, wasm_v128_load(src + k), n - k, dtc);
}

/* sum a[i] b[i], i < n4 (a multiple of 4): four lane sums, then across lanes. */
KILN_INLINE float ssd_dot(const float* a, const float* b, size_t n4) {
  v128_t acc = wasm_f32x4_splat(0.0f);
  for (size_t i = 0; i < n4; i += 4) acc = KILN_MADD(acc, wasm_v128_load(a + i), wasm_v128_load(b + i));
  return kiln_hsum(acc);
}

/* y += s x over n4 floats. */
KILN_INLINE void ssd_axpy(float* y, float s, const float* x, size_t n4) {
  const v128_t sv = wasm_f32x4_splat(s);
  for (size_t i = 0; i < n4; i += 4) wasm_v128_store(y + i, KILN_MADD(wasm_v128_load(y + i), sv, wasm_v128_load(x + i)));
}

/* y = s y over n4 floats. */
KILN_INLINE void ssd_scale(float* y, float s, size_t n4) {
  const v128_t sv = wasm_f32x4_splat(s);
  for (size_t i = 0; i < n4; i += 4) wasm_v128_store(y + i, wasm_f32x4_mul(wasm_v128_load(y + i), sv));
}

/*
 * The two inner kernels below stay functions of their own: inlined into the long
 * per-chunk functions, V8's register allocator spills their accumulators inside the
 * loops (twice as slow on a Mamba2 shape).
 */
#define SSD_KERNEL static __attribute__((noinline))

/* out[j] = ssd_dot(a, b + j bs, n4) for j < count: four dot products at a time, sharing a's loads. */
SSD_KERNEL void ssd_dots(const float* a, const float* b, size_t bs, size_t count, size_t n4, float* out) {
  size_t j = 0;
  for (; j + 4 <= count; j += 4) {
    const float* b0 = b + j * bs;
    v128_t c0 = wasm_f32x4_splat(0.0f), c1 = c0, c2 = c0, c3 = c0;
    for (size_t i = 0; i < n4; i += 4) {
      const v128_t av = wasm_v128_load(a + i);
      c0 = KILN_MADD(c0, av, wasm_v128_load(b0 + i));
      c1 = KILN_MADD(c1, av, wasm_v128_load(b0 + bs + i));
      c2 = KILN_MADD(c2, av, wasm_v128_load(b0 + 2 * bs + i));
      c3 = KILN_MADD(c3, av, wasm_v128_load(b0 + 3 * bs + i));
    }
    out[j] = kiln_hsum(c0);
    out[j + 1] = kiln_hsum(c1);
    out[j + 2] = kiln_hsum(c2);
    out[j + 3] = kiln_hsum(c3);
  }
  for (; j < count; j++) out[j] = ssd_dot(a, b + j * bs, n4);
}

/*
 * y[i] += sum_{j < count} w[j ws] (m ? m[j] : 1) x[j xs + i] for i < n4, j in order: the same
 * sums as `count` ssd_axpy calls, with y's vectors held in registers across j (16 floats
 * at a time).
 */
SSD_KERNEL void ssd_gemv(float* y, size_t n4, const float* w, size_t ws, const float* m, const float* x, size_t xs, size_t count) {
  size_t i = 0;
  for (; i + 16 <= n4; i += 16) {
    v128_t a0 = wasm_v128_load(y + i), a1 = wasm_v128_load(y + i + 4), a2 = wasm_v128_load(y + i + 8), a3 = wasm_v128_load(y + i + 12);
    for (size_t j = 0; j < count; j++) {
      const v128_t wv = wasm_f32x4_splat(m ? w[j * ws] * m[j] : w[j * ws]);
      const float* xj = x + j * xs + i;
      a0 = KILN_MADD(a0, wv, wasm_v128_load(xj));
      a1 = KILN_MADD(a1, wv, wasm_v128_load(xj + 4));
      a2 = KILN_MADD(a2, wv, wasm_v128_load(xj + 8));
      a3 = KILN_MADD(a3, wv, wasm_v128_load(xj + 12));
    }
    wasm_v128_store(y + i, a0);
    wasm_v128_store(y + i + 4, a1);
    wasm_v128_store(y + i + 8, a2);
    wasm_v128_store(y + i + 12, a3);
  }
  for (; i < n4; i += 4) {
    v128_t a0 = wasm_v128_load(y + i);
    for (size_t j = 0; j < count; j++) a0 = KILN_MADD(a0, wasm_f32x4_splat(m ? w[j * ws] * m[j] : w[j * ws]), wasm_v128_load(x + j * xs + i));
    wasm_v128_store(y + i, a0);
  }
}

KILN_INLINE void ssd_zero(float* y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = 0.0f;
}

/* ---- scratch ------------------------------------------------------------------ */

/*
 * Floats of one thread's scratch:
 *   forward:  X (Q·P4), B, C (Q·N4 each), W (Q·Q4), S (P·N4), y row (P4), dt, lam, coef (Q4 each)
 *   backward: X, dY, dX, dS·B (Q·P4 each), B, C, dSᵀx, Sᵀdy (Q·N4 each), W1, W2, dy·x (Q·Q4 each),
 *             S, dS (P·N4 each), dB and dC of the group's whole sequence (L·N4 each), a row (N4),
 *             dt, lam, sig, dlam, ddt, decay to the chunk end, exp(lam), xᵀdS·B (Q4 each)
 * Each block starts on a multiple of 4 floats (16 bytes).
 */
KILN_INLINE size_t ssd_scratch_floats(const SsdDims* d, int backward) {
  const size_t Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  if (!backward) return Q * P4 + 2 * Q * N4 + Q * Q4 + d->P * N4 + P4 + 3 * Q4;
  return 4 * Q * P4 + 4 * Q * N4 + 3 * Q * Q4 + 2 * d->P * N4 + 2 * d->L * N4 + N4 + 8 * Q4;
}

#endif
