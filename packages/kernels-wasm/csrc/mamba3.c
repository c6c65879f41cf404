/*
 * mamba3: mamba3ScanForward, Mamba3's trapezoidal scan computed chunk by chunk, and the
 * reduction of mamba3ScanBackward's per-(batch, head) parameter gradients (the backward
 * is csrc/mamba3_backward.c; the weights wo, wd and the turned rows B̄, C̄ in csrc/mamba3.h).
 *
 * Per batch b and head h, inside a chunk of tokens [t0, t1) with lam_s = sum_{r = t0..s} Δ_r A
 * and G the carry entering it (states[b,h,c], P x N, f32):
 *   y_t = D x_t + exp(lam_t) G C̄_t + sum_{s<t} exp(lam_t - lam_s) (C̄_t . B̄_s) wo_s x_s + (C̄_t . B̄_t) wd_t x_t
 *   G  <- exp(lam_{t1-1}) G + sum_s exp(lam_{t1-1} - lam_s) wo_s x_s B̄_s^T
 * Mamba2's chunked form (csrc/ssd.c) with the input weight wo off the diagonal and wd on it:
 * the chunk's work is ssd_forward_chunk (csrc/ssd_chunk.h).
 *
 * Threads take ranges of the batch x heads (b, h) pairs; each pair is one thread's
 * sequential work, so the bits do not depend on the thread count.
 */
#include "mamba3.h"

typedef struct {
  SsdForwardChunk c;  /* Bt, Ct: B̄, C̄; S: the carry G */
  float *cs, *sn;     /* Q x K4 */
  float *bB, *bC;     /* N4 */
  float* angle;       /* K4 */
  float *dt, *lm, *lmc, *wd, *wo; /* Q4 */
} Work;

/* Carves w (NULL: counts only); returns the floats taken, each block a multiple of 4. */
static size_t work_at(float* w, const SsdDims* d, Work* k) {
  const size_t Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4, K4 = m3_pairs4(d);
  size_t at = 0;
  M3_TAKE(w, at, k->c.X, Q * P4);
  M3_TAKE(w, at, k->c.Bt, Q * N4);
  M3_TAKE(w, at, k->c.Ct, Q * N4);
  M3_TAKE(w, at, k->c.W, Q * Q4);
  M3_TAKE(w, at, k->cs, Q * K4);
  M3_TAKE(w, at, k->sn, Q * K4);
  M3_TAKE(w, at, k->c.S, d->P * N4);
  M3_TAKE(w, at, k->c.yrow, P4);
  M3_TAKE(w, at, k->bB, N4);
  M3_TAKE(w, at, k->bC, N4);
  M3_TAKE(w, at, k->angle, K4);
  float** q4[] = {&k->dt, &k->c.lam, &k->lm, &k->lmc, &k->wd, &k->wo, &k->c.coef};
  for (size_t i = 0; i < sizeof q4 / sizeof q4[0]; i++) M3_TAKE(w, at, *q4[i], Q4);
  return at;
}

KILN_EXPORT(kiln_mamba3_scan_forward_scratch_floats)
uint32_t kiln_mamba3_scan_forward_scratch_floats(int seq_len, int head_dim, int state_size, int chunk_size) {
  const SsdDims d = ssd_scratch_dims(seq_len, head_dim, state_size, chunk_size);
  Work k;
  return (uint32_t)work_at(0, &d, &k);
}

/* ---- forward ------------------------------------------------------------------- */

static void forward_head(const Mamba3Args* a, const SsdDims* d, const Work* k, size_t b, size_t h, const int dtc) {
  float next[2];
  const SsdHead hd = m3_head(a, d, h, k->bB, k->bC, dtc);
  ssd_zero(k->c.S, d->P * d->N4);
  ssd_zero(k->angle, m3_pairs4(d));
  for (size_t c = 0; c < d->chunks; c++) {
    const size_t t0 = c * d->Q, len = ssd_chunk_len(d, t0);
    ssd_save_state(&a->s, d, b, h, c, k->c.S);
    m3_chunk_weights(a, d, b, h, t0, len, hd.bias, hd.A, k->dt, k->c.lam, k->lm, k->lmc, k->wd, k->wo, next, dtc);
    ssd_load_x(&a->s, d, b, h, t0, len, k->c.X, 0, dtc);
    m3_load_bc(a, d, b, h, t0, len, k->dt, k->bB, k->bC, k->angle, k->c.Bt, k->c.Ct, k->cs, k->sn, dtc);
    ssd_forward_chunk(&a->s, d, &k->c, b, h, t0, len, hd.Dh, k->wo, k->wd, dtc);
  }
}

KILN_INLINE void forward_range(const Mamba3Args* a, size_t i0, size_t i1, float* w, const int dtc) {
  const SsdDims d = ssd_dims(&a->s);
  Work k;
  work_at(w, &d, &k);
  for (size_t i = i0; i < i1; i++) forward_head(a, &d, &k, i / d.H, i % d.H, dtc);
}

KILN_EXPORT(kiln_mamba3_scan_forward)
void kiln_mamba3_scan_forward(const Mamba3Args* a, int thread, int nthreads) {
  SSD_RUN_RANGE(forward_range, a, &a->s, (size_t)a->s.batch * (size_t)a->s.heads, thread, nthreads);
}

/* ---- the backward's parameter gradients ------------------------------------------ */

/* dDtBias, dALog, dD, then dBBias and dCBias (N each): ssd_param_reduce (csrc/ssd.h). */
KILN_EXPORT(kiln_mamba3_scan_param_reduce)
void kiln_mamba3_scan_param_reduce(const Mamba3Args* a, int thread, int nthreads) {
  void* const rows[2] = {a->db_bias, a->dc_bias};
  ssd_param_reduce(&a->s, rows, 2, thread, nthreads);
}
