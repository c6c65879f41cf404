/*
 * ssd: what ssdScanForward (csrc/ssd.c) and ssdScanBackward (csrc/ssd_backward.c) share:
 * the argument block, the dimensions, each thread's scratch layout, the scalar
 * softplus / sigmoid / exp, the chunk's dt and running sum of dt·A, and row loads, stores,
 * dot products and axpys on f32x4 lanes.
 *
 * Every row copied into scratch (x, dy, B, C, states) is padded with zeros to a
 * multiple of 4 floats (P4, N4), so the vector loops run over whole vectors and the
 * padding lanes stay 0 in every sum.
 */
#ifndef KILN_SSD_H
#define KILN_SSD_H

#include "kiln_storage.h"

/* Host-written argument block; mirrored in src/backend-ssd.ts. */
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

/* ---- scalar math ------------------------------------------------------------- */

KILN_INLINE float ssd_exp(float x) { return wasm_f32x4_extract_lane(kiln_exp_f32x4(wasm_f32x4_splat(x)), 0); }

/* softplus(v) = v past 20, else log1p(exp(v)) (its series when exp(v) is tiny). */
KILN_INLINE float ssd_softplus(float v) {
  if (v > 20.0f) return v;
  const float e = ssd_exp(v);
  if (e < 1e-4f) return e * (1.0f - e * (0.5f - e * (1.0f / 3.0f)));
  return (float)kiln_log(1.0 + (double)e);
}

/* softplus' derivative: 1 past 20. */
KILN_INLINE float ssd_sigmoid(float v) { return v > 20.0f ? 1.0f : 1.0f / (1.0f + ssd_exp(-v)); }

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
