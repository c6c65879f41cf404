/*
 * ssd_chunk: the per-chunk work Mamba2's scan (csrc/ssd.c, csrc/ssd_backward.c) and Mamba3's
 * (csrc/mamba3.c, csrc/mamba3_backward.c) do alike, on the chunk's rows in f32 scratch.
 * Mamba3's is Mamba2's with an input weight wo in place of Δ (and wd on the diagonal) and
 * rows B̄, C̄ turned and biased before they get here; S is Mamba3's carry G.
 *
 * Each scan lays out its own scratch and points these blocks into it:
 * X, DY (Q x P4), B, C (Q x N4), W (Q x Q4), S (P x N4), lam (Q4): as in csrc/ssd.h.
 */
#ifndef KILN_SSD_CHUNK_H
#define KILN_SSD_CHUNK_H

#include "ssd.h"

/* The forward's blocks. */
typedef struct {
  float* X;          /* Q x P4 */
  float *Bt, *Ct;    /* Q x N4 */
  float* W;          /* Q x Q4: the chunk's mixing matrix, row t over s <= t */
  float* S;          /* P x N4: the state entering the chunk, then leaving it */
  float* yrow;       /* P4 */
  float *lam, *coef; /* Q4 */
} SsdForwardChunk;

/* The backward's blocks that both backwards fill the same way (ssd_backward_products). */
typedef struct {
  float *X, *DY, *dSB;         /* Q x P4: x, dy, dS B_s */
  float *Bt, *Ct, *dSx, *StDy; /* Q x N4: B, C, dS^T x_s, S^T dy_s */
  float *W1, *W2, *DYX;        /* Q x Q4 */
  float *S, *dS;               /* P x N4: the state entering the chunk, the adjoint of the one leaving it */
  float *lam, *eE, *eL, *xd;   /* Q4 */
} SsdBackwardChunk;

/* states[b, h, c]: the state entering chunk c, P x N f32 (no padding). */
KILN_INLINE float* ssd_state_at(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, size_t c) {
  return a->states + ((b * d->H + h) * d->chunks + c) * d->P * d->N;
}

/* The state entering chunk c of (b, h) from states into S, rows zero-padded to N4. */
KILN_INLINE void ssd_load_state(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, size_t c, float* S) {
  const float* st = ssd_state_at(a, d, b, h, c);
  for (size_t p = 0; p < d->P; p++)
    for (size_t n = 0; n < d->N4; n++) S[p * d->N4 + n] = n < d->N ? st[p * d->N + n] : 0.0f;
}

/* S (rows N4 apart) into states[b, h, c]. */
KILN_INLINE void ssd_save_state(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, size_t c, const float* S) {
  float* st = ssd_state_at(a, d, b, h, c);
  for (size_t p = 0; p < d->P; p++)
    for (size_t n = 0; n < d->N; n++) st[p * d->N + n] = S[p * d->N4 + n];
}

/* Rows [t0, t0 + len) of (b, h)'s x (and dy when DY is not NULL) into X (and DY), P4 apart. */
KILN_INLINE void ssd_load_x(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, size_t t0, size_t len, float* X, float* DY, const int dtc) {
  for (size_t i = 0; i < len; i++) {
    const size_t r = b * d->L + t0 + i;
    ssd_load_row(X + i * d->P4, a->x, r * d->xs + h * d->P, d->P, dtc);
    if (DY) ssd_load_row(DY + i * d->P4, a->dy, (r * d->H + h) * d->P, d->P, dtc);
  }
}

/* Rows [t0, t0 + len) of B and C of head h's group into Bt, Ct, N4 apart. */
KILN_INLINE void ssd_load_bc(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, size_t t0, size_t len, float* Bt, float* Ct, const int dtc) {
  const size_t N = d->N, g = h / d->hpg;
  for (size_t i = 0; i < len; i++) {
    const size_t at = (b * d->L + t0 + i) * d->bs + g * N;
    ssd_load_row(Bt + i * d->N4, a->b, at, N, dtc);
    ssd_load_row(Ct + i * d->N4, a->c, at, N, dtc);
  }
}

/*
 * The chunk [t0, t0 + len) of (b, h), its rows loaded and S the state entering it:
 *   W[t][s] = exp(lam_t - lam_s) (C_t . B_s) wo_s, s <= t, but (C_t . B_t) wd_t at s = t when wd is given
 *   y_t = D x_t + exp(lam_t) S C_t + sum_{s <= t} W[t][s] x_s          (stored to y)
 *   S  <- exp(E) S + sum_s exp(E - lam_s) wo_s x_s B_s^T, E = lam_{len-1}
 */
KILN_INLINE void ssd_forward_chunk(const SsdArgs* a, const SsdDims* d, const SsdForwardChunk* k, size_t b, size_t h, size_t t0, size_t len,
                                   float Dh, const float* wo, const float* wd, const int dtc) {
  const size_t L = d->L, H = d->H, P = d->P, N4 = d->N4, Q4 = d->Q4, P4 = d->P4;
  const float *X = k->X, *Bt = k->Bt, *Ct = k->Ct, *lam = k->lam;
  float *S = k->S, *yrow = k->yrow;
  for (size_t t = 0; t < len; t++) {
    float* wr = k->W + t * Q4; /* lanes past t are not read */
    const float* ct = Ct + t * N4;
    ssd_dots(ct, Bt, N4, t + 1, N4, wr);
    const float diag = wd ? wr[t] * wd[t] : 0.0f;
    const v128_t lt = wasm_f32x4_splat(lam[t]);
    for (size_t s = 0; s <= t; s += 4) {
      const v128_t dec = kiln_exp_f32x4(wasm_f32x4_sub(lt, wasm_v128_load(lam + s)));
      wasm_v128_store(wr + s, wasm_f32x4_mul(wasm_f32x4_mul(wasm_v128_load(wr + s), dec), wasm_v128_load(wo + s)));
    }
    if (wd) wr[t] = diag;
    const float eL = kiln_exp_f32(lam[t]);
    ssd_dots(ct, S, N4, P, N4, yrow);
    for (size_t p = P; p < P4; p++) yrow[p] = 0.0f;
    ssd_scale(yrow, eL, P4);
    ssd_axpy(yrow, Dh, X + t * P4, P4);
    ssd_gemv(yrow, P4, wr, 1, 0, X, P4, t + 1);
    ssd_store_row(a->y, ((b * L + t0 + t) * H + h) * P, yrow, P, dtc);
  }
  /* the state leaving the chunk */
  const float E = lam[len - 1];
  const float eE = kiln_exp_f32(E);
  for (size_t s = 0; s < len; s++) k->coef[s] = kiln_exp_f32(E - lam[s]) * wo[s];
  for (size_t p = 0; p < P; p++) {
    float* row = S + p * N4;
    ssd_scale(row, eE, N4);
    ssd_gemv(row, N4, X + p, P4, k->coef, Bt, N4, len);
  }
}

/*
 * The backward's products over a chunk of len tokens, its rows, lam, S and dS in place:
 *   eE_s = exp(E - lam_s), eL_s = exp(lam_s), E = lam_{len-1}
 *   W1[t][s] = exp(lam_t - lam_s) C_t . B_s, DYX[t][s] = dy_t . x_s, W2[t][s] = exp(lam_t - lam_s) DYX[t][s]
 *     (s <= t; lanes past t are not read)
 *   dSB_s = dS B_s (over n), dSx_s = dS^T x_s, StDy_s = S^T dy_s (over p), xd_s = x_s . dSB_s
 * Returns exp(E).
 */
KILN_INLINE float ssd_backward_products(const SsdDims* d, const SsdBackwardChunk* k, size_t len) {
  const size_t P = d->P, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  const float *X = k->X, *DY = k->DY, *Bt = k->Bt, *Ct = k->Ct, *S = k->S, *dS = k->dS, *lam = k->lam;
  const float E = lam[len - 1], eEall = kiln_exp_f32(E);
  for (size_t s = 0; s < len; s++) {
    k->eE[s] = kiln_exp_f32(E - lam[s]);
    k->eL[s] = kiln_exp_f32(lam[s]);
  }
  for (size_t t = 0; t < len; t++) {
    float *w1 = k->W1 + t * Q4, *w2 = k->W2 + t * Q4, *yx = k->DYX + t * Q4;
    ssd_dots(Ct + t * N4, Bt, N4, t + 1, N4, w1);
    ssd_dots(DY + t * P4, X, P4, t + 1, P4, yx);
    const v128_t lt = wasm_f32x4_splat(lam[t]);
    for (size_t s = 0; s <= t; s += 4) {
      const v128_t dec = kiln_exp_f32x4(wasm_f32x4_sub(lt, wasm_v128_load(lam + s)));
      wasm_v128_store(w1 + s, wasm_f32x4_mul(wasm_v128_load(w1 + s), dec));
      wasm_v128_store(w2 + s, wasm_f32x4_mul(wasm_v128_load(yx + s), dec));
    }
  }
  for (size_t s = 0; s < len; s++) {
    float* sb = k->dSB + s * P4;
    ssd_dots(Bt + s * N4, dS, N4, P, N4, sb);
    for (size_t p = P; p < P4; p++) sb[p] = 0.0f;
    float* sx = k->dSx + s * N4;
    float* sy = k->StDy + s * N4;
    ssd_zero(sx, N4);
    ssd_zero(sy, N4);
    ssd_gemv(sx, N4, X + s * P4, 1, 0, dS, N4, P);
    ssd_gemv(sy, N4, DY + s * P4, 1, 0, S, N4, P);
    k->xd[s] = ssd_dot(X + s * P4, sb, P4);
  }
  return eEall;
}

/* The adjoint of the state entering the chunk: dS <- exp(E) dS + sum_t eL_t dy_t C_t^T. */
KILN_INLINE void ssd_carry_adjoint(const SsdDims* d, const SsdBackwardChunk* k, size_t len, float eEall) {
  for (size_t p = 0; p < d->P; p++) {
    float* row = k->dS + p * d->N4;
    ssd_scale(row, eEall, d->N4);
    ssd_gemv(row, d->N4, k->DY + p, d->P4, k->eL, k->Ct, d->N4, len);
  }
}

#endif
