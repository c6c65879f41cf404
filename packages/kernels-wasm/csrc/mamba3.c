/*
 * mamba3: mamba3ScanForward, Mamba3's trapezoidal scan computed chunk by chunk, and the
 * reduction of mamba3ScanBackward's per-(batch, head) parameter gradients (the backward
 * is csrc/mamba3_backward.c; the weights wo, wd and the turned rows B̄, C̄ in csrc/mamba3.h).
 *
 * Per batch b and head h, inside a chunk of tokens [t0, t1) with lam_s = sum_{r = t0..s} Δ_r A
 * and G the carry entering it (states[b,h,c], P x N, f32):
 *   y_t = D x_t + exp(lam_t) G C̄_t + sum_{s<t} exp(lam_t - lam_s) (C̄_t . B̄_s) wo_s x_s + (C̄_t . B̄_t) wd_t x_t
 *   G  <- exp(lam_{t1-1}) G + sum_s exp(lam_{t1-1} - lam_s) wo_s x_s B̄_s^T
 * Mamba2's chunked form (csrc/ssd.c) with the input weight wo off the diagonal and wd on it.
 *
 * Threads take ranges of the batch x heads (b, h) pairs; each pair is one thread's
 * sequential work, so the bits do not depend on the thread count.
 */
#include "mamba3.h"

typedef struct {
  float* X;           /* Q x P4 */
  float *Bt, *Ct;     /* Q x N4: B̄, C̄ */
  float* W;           /* Q x Q4 */
  float *cs, *sn;     /* Q x K4 */
  float* S;           /* P x N4: the carry G */
  float* yrow;        /* P4 */
  float *bB, *bC;     /* N4 */
  float* angle;       /* K4 */
  float *dt, *lam, *lm, *lmc, *wd, *wo, *coef; /* Q4 */
} Work;

/* Carves w (NULL: counts only); returns the floats taken, each block a multiple of 4. */
static size_t work_at(float* w, const SsdDims* d, Work* k) {
  const size_t Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4, K4 = m3_pairs4(d);
  size_t at = 0;
  M3_TAKE(w, at, k->X, Q * P4);
  M3_TAKE(w, at, k->Bt, Q * N4);
  M3_TAKE(w, at, k->Ct, Q * N4);
  M3_TAKE(w, at, k->W, Q * Q4);
  M3_TAKE(w, at, k->cs, Q * K4);
  M3_TAKE(w, at, k->sn, Q * K4);
  M3_TAKE(w, at, k->S, d->P * N4);
  M3_TAKE(w, at, k->yrow, P4);
  M3_TAKE(w, at, k->bB, N4);
  M3_TAKE(w, at, k->bC, N4);
  M3_TAKE(w, at, k->angle, K4);
  float** q4[] = {&k->dt, &k->lam, &k->lm, &k->lmc, &k->wd, &k->wo, &k->coef};
  for (size_t i = 0; i < sizeof q4 / sizeof q4[0]; i++) M3_TAKE(w, at, *q4[i], Q4);
  return at;
}

KILN_EXPORT(kiln_mamba3_scan_forward_scratch_floats)
uint32_t kiln_mamba3_scan_forward_scratch_floats(int seq_len, int head_dim, int state_size, int chunk_size) {
  SsdArgs a = {0};
  a.seq_len = seq_len;
  a.heads = a.groups = 1;
  a.head_dim = head_dim;
  a.state_size = state_size;
  a.chunk_size = chunk_size;
  const SsdDims d = ssd_dims(&a);
  Work k;
  return (uint32_t)work_at(0, &d, &k);
}

/* ---- forward ------------------------------------------------------------------- */

static void forward_head(const Mamba3Args* a, const SsdDims* d, const Work* k, size_t b, size_t h, const int dtc) {
  const size_t L = d->L, H = d->H, P = d->P, N = d->N, Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  float *X = k->X, *Bt = k->Bt, *Ct = k->Ct, *W = k->W, *S = k->S, *yrow = k->yrow;
  float *lam = k->lam, *wo = k->wo, *wd = k->wd;
  float A, bias, Dh, next[2];
  m3_head(a, d, h, &A, &bias, &Dh, k->bB, k->bC, dtc);
  ssd_zero(S, P * N4);
  ssd_zero(k->angle, m3_pairs4(d));
  for (size_t c = 0; c < d->chunks; c++) {
    const size_t t0 = c * Q, len = L - t0 < Q ? L - t0 : Q;
    float* st = a->s.states + ((b * H + h) * d->chunks + c) * P * N;
    for (size_t p = 0; p < P; p++)
      for (size_t n = 0; n < N; n++) st[p * N + n] = S[p * N4 + n];
    m3_chunk_weights(a, d, b, h, t0, len, bias, A, k->dt, lam, k->lm, k->lmc, wd, wo, next, dtc);
    for (size_t i = 0; i < len; i++) ssd_load_row(X + i * P4, a->s.x, (b * L + t0 + i) * d->xs + h * P, P, dtc);
    m3_load_bc(a, d, b, h, t0, len, k->dt, k->bB, k->bC, k->angle, Bt, Ct, k->cs, k->sn, dtc);
    for (size_t t = 0; t < len; t++) {
      /* W[t][s] = exp(lam_t - lam_s) (C̄_t . B̄_s) wo_s for s < t, (C̄_t . B̄_t) wd_t at s = t (lanes past t are not read) */
      float* wr = W + t * Q4;
      const float* ct = Ct + t * N4;
      ssd_dots(ct, Bt, N4, t + 1, N4, wr);
      const float diag = wr[t] * wd[t];
      const v128_t lt = wasm_f32x4_splat(lam[t]);
      for (size_t s = 0; s <= t; s += 4) {
        const v128_t dec = kiln_exp_f32x4(wasm_f32x4_sub(lt, wasm_v128_load(lam + s)));
        wasm_v128_store(wr + s, wasm_f32x4_mul(wasm_f32x4_mul(wasm_v128_load(wr + s), dec), wasm_v128_load(wo + s)));
      }
      wr[t] = diag;
      const float eL = kiln_exp_f32(lam[t]);
      ssd_dots(ct, S, N4, P, N4, yrow);
      for (size_t p = P; p < P4; p++) yrow[p] = 0.0f;
      ssd_scale(yrow, eL, P4);
      ssd_axpy(yrow, Dh, X + t * P4, P4);
      ssd_gemv(yrow, P4, wr, 1, 0, X, P4, t + 1);
      ssd_store_row(a->s.y, ((b * L + t0 + t) * H + h) * P, yrow, P, dtc);
    }
    /* the carry leaving the chunk */
    const float E = lam[len - 1];
    const float eE = kiln_exp_f32(E);
    for (size_t s = 0; s < len; s++) k->coef[s] = kiln_exp_f32(E - lam[s]) * wo[s];
    for (size_t p = 0; p < P; p++) {
      float* row = S + p * N4;
      ssd_scale(row, eE, N4);
      ssd_gemv(row, N4, X + p, P4, k->coef, Bt, N4, len);
    }
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
  size_t i0, i1;
  kiln_split((size_t)a->s.batch * (size_t)a->s.heads, 1, thread, nthreads, &i0, &i1);
  if (i0 >= i1) return;
  float* w = a->s.scratch + (size_t)thread * (size_t)a->s.scratch_stride;
  switch (a->s.dtype) {
    case KILN_DT_F32: forward_range(a, i0, i1, w, KILN_DT_F32); break;
    case KILN_DT_BF16: forward_range(a, i0, i1, w, KILN_DT_BF16); break;
    default: forward_range(a, i0, i1, w, KILN_DT_F16); break;
  }
}

/* ---- the backward's parameter gradients ------------------------------------------ */

/*
 * dDtBias[h], dALog[h], dD[h], dBBias[h, :], dCBias[h, :] += the sums over b (ascending) of
 * the backward's per-(b, h) partials, in f32, each added to its output once. Threads take
 * ranges of heads.
 */
KILN_EXPORT(kiln_mamba3_scan_param_reduce)
void kiln_mamba3_scan_param_reduce(const Mamba3Args* a, int thread, int nthreads) {
  size_t h0, h1;
  const size_t H = (size_t)a->s.heads, B = (size_t)a->s.batch, N = (size_t)a->s.state_size, M = M3_PARTIALS(N);
  kiln_split(H, 1, thread, nthreads, &h0, &h1);
  const int gt = a->s.grad_dtype;
  for (size_t h = h0; h < h1; h++) {
    for (size_t j = 0; j < M; j++) {
      float s = 0.0f;
      for (size_t b = 0; b < B; b++) s += a->s.partials[(b * H + h) * M + j];
      void* out;
      size_t at;
      if (j < 3) {
        out = j == 0 ? a->s.ddt_bias : j == 1 ? a->s.da_log : a->s.dd;
        at = h;
      } else {
        out = j < 3 + N ? a->db_bias : a->dc_bias;
        at = h * N + (j - 3) % N;
      }
      kiln_store1(out, at, kiln_load1(out, at, gt) + s, gt);
    }
  }
}
