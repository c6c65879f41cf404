/*
 * mamba3_backward: mamba3ScanBackward, the reverse of csrc/mamba3.c's chunked scan.
 *
 * Per (b, h), chunks in reverse, dS (the adjoint of the carry leaving the chunk) from 0;
 * G = states[b,h,c], Δ, λ, wo, wd, B̄, C̄ recomputed, E = lam_{t1-1}, inside the chunk:
 *   W1[t][s] = exp(lam_t - lam_s) C̄_t . B̄_s, DYX[t][s] = dy_t . x_s, W2[t][s] = exp(lam_t - lam_s) DYX[t][s],
 *   eE_s = exp(E - lam_s)
 *   dx_s  = D dy_s + wo_s [sum_{t>s} W1[t][s] dy_t + eE_s dS B̄_s] + wd_s W1[s][s] dy_s
 *   dB̄_s  = wo_s [sum_{t>s} W2[t][s] C̄_t + eE_s dS^T x_s] + wd_s W2[s][s] C̄_s
 *   dC̄_t  = exp(lam_t) G^T dy_t + sum_{s<t} W2[t][s] wo_s B̄_s + W2[t][t] wd_t B̄_t
 *   dwo_s = sum_{t>s} W1[t][s] DYX[t][s] + eE_s x_s^T dS B̄_s,  dwd_s = W1[s][s] DYX[s][s]
 *   dl_s = sum_{k = s..t1-1} dlam_k (dlam as csrc/ssd_backward.c's with dt_s replaced by wo_s,
 *     summed directly, see below): dΔ_s += A dl_s, dA += Δ_s dl_s
 *   wo_s = λ_s Δ_s + (1 - λ_{s+1}) Δ_{s+1}, wd_s = λ_s Δ_s:
 *     dΔ_s += λ_s (dwo_s + dwd_s), dλ_s += Δ_s (dwo_s + dwd_s),
 *     dΔ_{s+1} += (1 - λ_{s+1}) dwo_s, dλ_{s+1} -= Δ_{s+1} dwo_s   (s + 1 may be the next chunk's)
 *   dS <- exp(E) dS + sum_t exp(lam_t) dy_t C̄_t^T
 * The rotation: Φ_{t,k} = sum_{u>=t} dφ_{u,k}, the adjoint of the angle that θ_t adds to every later
 *   token (chunk_angle_grads computes it without that sum), dθ_{t,k} = Δ_t Φ_{t,k},
 *   dΔ_t += sum_k θ_{t,k} Φ_{t,k}; dB̂ = R(-φ_t) dB̄, dĈ likewise. A first pass over the head's
 *   tokens keeps φ at each chunk's start, so each chunk repeats the forward's running sum.
 * dΔ and dλ of the head's whole sequence stay in scratch; a last pass writes
 * dDt = dΔ softplus'(dtRaw + dtBias) and dLambda = dλ λ (1 - λ).
 *
 * Threads take ranges of the batch x groups (b, g) pairs. A pair's heads run in ascending
 * order and add their dB̂ and dĈ into the pair's f32 rows in scratch, written out once at
 * the end (dB and dC are overwritten, their gaps never touched). Each (b, h) leaves its
 * parameter-gradient sums (dDtBias, dALog, dD, dBBias, dCBias) in `partials`;
 * kiln_mamba3_scan_param_reduce (csrc/mamba3.c) adds them up over b in order: the same
 * bits whatever the thread count.
 */
#include "mamba3.h"

typedef struct {
  SsdBackwardChunk c;                       /* Bt, Ct: B̄, C̄; S: the carry G */
  float* DX;                                /* Q x P4 */
  float *dBb, *dCb;                         /* Q x N4: dB̄, dC̄, then dB̂, dĈ */
  float* PhV;                               /* Q x N4: Φ_{t,k} = PhV[t][2k] + PhV[t][2k+1] */
  float *cs, *sn;                           /* Q x K4 */
  float *dBacc, *dCacc;                     /* L x N4 */
  float *dDelta, *dLam;                     /* L4: the head's whole sequence */
  float* phi0;                              /* chunks x K4: φ entering each chunk */
  float *angle, *trow;                      /* K4 */
  float *bB, *bC, *dbB, *dcB, *R;           /* N4 */
  float *dt, *lm, *lmc, *wd, *wo, *dl, *dwo; /* Q4 */
} Work;

/* Carves w (NULL: counts only); returns the floats taken, each block a multiple of 4. */
static size_t work_at(float* w, const SsdDims* d, Work* k) {
  const size_t Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4, K4 = m3_pairs4(d), L4 = SSD_R4(d->L);
  size_t at = 0;
  float** qp4[] = {&k->c.X, &k->c.DY, &k->DX, &k->c.dSB};
  for (size_t i = 0; i < 4; i++) M3_TAKE(w, at, *qp4[i], Q * P4);
  float** qn4[] = {&k->c.Bt, &k->c.Ct, &k->c.dSx, &k->c.StDy, &k->dBb, &k->dCb, &k->PhV};
  for (size_t i = 0; i < 7; i++) M3_TAKE(w, at, *qn4[i], Q * N4);
  float** qq4[] = {&k->c.W1, &k->c.W2, &k->c.DYX};
  for (size_t i = 0; i < 3; i++) M3_TAKE(w, at, *qq4[i], Q * Q4);
  M3_TAKE(w, at, k->cs, Q * K4);
  M3_TAKE(w, at, k->sn, Q * K4);
  M3_TAKE(w, at, k->c.S, d->P * N4);
  M3_TAKE(w, at, k->c.dS, d->P * N4);
  M3_TAKE(w, at, k->dBacc, d->L * N4);
  M3_TAKE(w, at, k->dCacc, d->L * N4);
  M3_TAKE(w, at, k->dDelta, L4);
  M3_TAKE(w, at, k->dLam, L4);
  M3_TAKE(w, at, k->phi0, d->chunks * K4);
  M3_TAKE(w, at, k->angle, K4);
  M3_TAKE(w, at, k->trow, K4);
  float** n4[] = {&k->bB, &k->bC, &k->dbB, &k->dcB, &k->R};
  for (size_t i = 0; i < 5; i++) M3_TAKE(w, at, *n4[i], N4);
  float** q4[] = {&k->dt, &k->c.lam, &k->lm, &k->lmc, &k->wd, &k->wo, &k->dl, &k->dwo, &k->c.eE, &k->c.eL, &k->c.xd};
  for (size_t i = 0; i < sizeof q4 / sizeof q4[0]; i++) M3_TAKE(w, at, *q4[i], Q4);
  return at;
}

KILN_EXPORT(kiln_mamba3_scan_backward_scratch_floats)
uint32_t kiln_mamba3_scan_backward_scratch_floats(int seq_len, int head_dim, int state_size, int chunk_size) {
  const SsdDims d = ssd_scratch_dims(seq_len, head_dim, state_size, chunk_size);
  Work k;
  return (uint32_t)work_at(0, &d, &k);
}

/*
 * row = wo_s [e v + sum_{t>s} M[t][s] u_t] + wd_s M[s][s] u_s over n4 floats: the adjoint of token s's
 * input row (dX with M = W1, u = dy; dB̄ with M = W2, u = C̄), rows of M Q4 apart, of u n4 apart.
 */
KILN_INLINE void m3_input_adjoint(float* row, size_t n4, float e, const float* v, const float* M, size_t Q4, const float* u, size_t s, size_t len,
                                  float wo, float wd) {
  ssd_zero(row, n4);
  ssd_axpy(row, e, v, n4);
  ssd_gemv(row, n4, M + (s + 1) * Q4 + s, Q4, 0, u + (s + 1) * n4, n4, len - s - 1);
  ssd_scale(row, wo, n4);
  ssd_axpy(row, wd * M[s * Q4 + s], u + s * n4, n4);
}

/* dB̄, dC̄ of the chunk's tokens (into dBb, dCb) and the chunk's dX rows. */
static void chunk_row_grads(const Mamba3Args* a, const SsdDims* d, const Work* k, size_t b, size_t h, size_t t0, size_t len, float Dh,
                            const int dtc) {
  const size_t L = d->L, P = d->P, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  const SsdBackwardChunk* kc = &k->c;
  const float *W2 = kc->W2, *wo = k->wo, *wd = k->wd;
  for (size_t s = 0; s < len; s++) {
    float* dx = k->DX + s * P4;
    m3_input_adjoint(dx, P4, kc->eE[s], kc->dSB + s * P4, kc->W1, Q4, kc->DY, s, len, wo[s], wd[s]);
    ssd_axpy(dx, Dh, kc->DY + s * P4, P4);
    ssd_store_row(a->s.dx, (b * L + t0 + s) * d->xs + h * P, dx, P, dtc);
  }
  for (size_t s = 0; s < len; s++) m3_input_adjoint(k->dBb + s * N4, N4, kc->eE[s], kc->dSx + s * N4, W2, Q4, kc->Ct, s, len, wo[s], wd[s]);
  for (size_t t = 0; t < len; t++) {
    float* row = k->dCb + t * N4;
    ssd_zero(row, N4);
    ssd_axpy(row, kc->eL[t], kc->StDy + t * N4, N4);
    ssd_gemv(row, N4, W2 + t * Q4, 1, wo, kc->Bt, N4, t);
    ssd_axpy(row, wd[t] * W2[t * Q4 + t], kc->Bt + t * N4, N4);
  }
}

/* y += c a ⊙ J(b) over n4 floats, J turning each pair (re, im) to (im, -re). */
KILN_INLINE void m3_add_prod_j(float* y, float c, const float* a, const float* b, size_t n4) {
  const v128_t cv = wasm_f32x4_splat(c), flip = wasm_i32x4_make(0, (int)0x80000000, 0, (int)0x80000000);
  for (size_t i = 0; i < n4; i += 4) {
    const v128_t bj = wasm_v128_xor(wasm_i32x4_shuffle(wasm_v128_load(b + i), wasm_v128_load(b + i), 1, 0, 3, 2), flip);
    wasm_v128_store(y + i, KILN_MADD(wasm_v128_load(y + i), wasm_f32x4_mul(cv, wasm_v128_load(a + i)), bj));
  }
}

/*
 * PhV: the angles' adjoints Φ_t of the chunk's tokens. The suffix sum of dφ has large terms that
 * cancel where Φ is tiny (after a token that empties the state), so Φ is summed directly: turning
 * every B̄_u, C̄_u (u >= t) alike is turning the carry G_{t-1} into token t, hence
 *   Φ_{t,k} = <D_t, G_{t-1}>_k = sum_p D[p][2k] G_{t-1}[p][2k+1] - D[p][2k+1] G_{t-1}[p][2k]
 * with D_t the adjoint of G_{t-1} through token t. In the chunk, G_{t-1} = exp(lam_{t-1}) G + the
 * chunk's inputs s < t and D_t = exp(E - lam_{t-1}) dS + the outputs u >= t, so, a ⊙ J(b) summed over
 * each pair being <a, b>_k:
 *   Φ_t = exp(E) <dS, G> + sum_{u>=t} exp(lam_u) <C̄_u, G^T dy_u> + sum_{s<t} eE_s wo_s <dS^T x_s, B̄_s>
 *       + sum_{s<t<=u} W2[u][s] wo_s <C̄_u, B̄_s>
 * every term a real contribution, none cancelling another.
 */
static void chunk_angle_grads(const SsdDims* d, const Work* k, size_t len, float eEall) {
  const size_t P = d->P, N4 = d->N4, Q4 = d->Q4;
  float *V = k->PhV, *R = k->R;
  ssd_zero(R, N4);
  for (size_t p = 0; p < P; p++) m3_add_prod_j(R, eEall, k->c.dS + p * N4, k->c.S + p * N4, N4);
  for (size_t u = len; u-- > 0;) {
    m3_add_prod_j(R, k->c.eL[u], k->c.Ct + u * N4, k->c.StDy + u * N4, N4);
    for (size_t i = 0; i < N4; i++) V[u * N4 + i] = R[i];
  }
  ssd_zero(R, N4);
  for (size_t t = 0; t < len; t++) {
    ssd_axpy(V + t * N4, 1.0f, R, N4);
    m3_add_prod_j(R, k->c.eE[t] * k->wo[t], k->c.dSx + t * N4, k->c.Bt + t * N4, N4);
  }
  /* R = sum_{s' <= s} W2[u][s'] wo_s' B̄_s', so <C̄_u, R> is token s + 1's share of row u */
  for (size_t u = 1; u < len; u++) {
    ssd_zero(R, N4);
    for (size_t s = 0; s < u; s++) {
      ssd_axpy(R, k->c.W2[u * Q4 + s] * k->wo[s], k->c.Bt + s * N4, N4);
      m3_add_prod_j(V + (s + 1) * N4, 1.0f, k->c.Ct + u * N4, R, N4);
    }
  }
}

/* Through the rotation (dθ written, dΔ's share), then dB̂, dĈ into the group's rows and the head's bias sums. */
static void chunk_unturn(const Mamba3Args* a, const SsdDims* d, const Work* k, size_t b, size_t h, size_t t0, size_t len, const int dtc) {
  const size_t N4 = d->N4, K = m3_pairs(d), K4 = m3_pairs4(d);
  for (size_t t = 0; t < len; t++) {
    float *db = k->dBb + t * N4, *dc = k->dCb + t * N4;
    if (a->rotates) {
      const float* v = k->PhV + t * N4;
      const size_t r = b * d->L + t0 + t, at = (r * d->H + h) * K;
      float rot = 0.0f;
      for (size_t q = 0; q < K; q++) {
        const float phi = v[2 * q] + v[2 * q + 1];
        k->trow[q] = k->dt[t] * phi;
        rot += kiln_load1(a->theta, at + q, dtc) * phi;
      }
      ssd_store_row(a->dtheta, at, k->trow, K, dtc);
      k->dDelta[t0 + t] += rot;
      m3_turn(db, k->cs + t * K4, k->sn + t * K4, K, -1.0f);
      m3_turn(dc, k->cs + t * K4, k->sn + t * K4, K, -1.0f);
    }
    ssd_axpy(k->dBacc + (t0 + t) * N4, 1.0f, db, N4);
    ssd_axpy(k->dCacc + (t0 + t) * N4, 1.0f, dc, N4);
    ssd_axpy(k->dbB, 1.0f, db, N4);
    ssd_axpy(k->dcB, 1.0f, dc, N4);
  }
}

/* One chunk [t0, t0 + len) of (b, h): dX, dθ of its tokens, its shares of dΔ, dλ, dB, dC, dS carried back. */
static void backward_chunk(const Mamba3Args* a, const SsdDims* d, const Work* k, size_t b, size_t h, size_t c, const SsdHead* hd, float sums[2],
                           const int dtc) {
  const size_t L = d->L, P = d->P, Q = d->Q, N4 = d->N4, Q4 = d->Q4;
  const size_t t0 = c * Q, len = ssd_chunk_len(d, t0);
  const SsdBackwardChunk* kc = &k->c;
  float *Ct = kc->Ct, *S = kc->S, *dS = kc->dS;
  float *W1 = kc->W1, *DYX = kc->DYX, *dt = k->dt, *lam = kc->lam, *wo = k->wo;
  float next[2];

  ssd_load_state(&a->s, d, b, h, c, S);
  m3_chunk_weights(a, d, b, h, t0, len, hd->bias, hd->A, dt, lam, k->lm, k->lmc, k->wd, wo, next, dtc);
  ssd_load_x(&a->s, d, b, h, t0, len, kc->X, kc->DY, dtc);
  for (size_t q = 0; q < m3_pairs(d); q++) k->angle[q] = k->phi0[c * m3_pairs4(d) + q];
  m3_load_bc(a, d, b, h, t0, len, dt, k->bB, k->bC, k->angle, kc->Bt, Ct, k->cs, k->sn, dtc);
  const float eEall = ssd_backward_products(d, kc, len);
  chunk_row_grads(a, d, k, b, h, t0, len, hd->Dh, dtc);

  /* dwo; dl_t, the adjoint of the decay shared by every u >= t of the chunk (all of lam_u - lam_{t-1}),
     summed directly as Φ is (chunk_angle_grads), with a plain product for a ⊙ J(b):
     dl_t = exp(E) <dS, G> + sum_{u>=t} exp(lam_u) dy_u^T G C̄_u + sum_{s<t} eE_s wo_s x_s^T dS B̄_s
            + sum_{s<t<=u} W1[u][s] wo_s DYX[u][s] */
  float *dwo = k->dwo, *dl = k->dl;
  for (size_t s = 0; s < len; s++) {
    float v = kc->eE[s] * kc->xd[s];
    for (size_t t = s + 1; t < len; t++) v += W1[t * Q4 + s] * DYX[t * Q4 + s];
    dwo[s] = v;
  }
  float acc = eEall * ssd_dot(dS, S, P * N4);
  for (size_t u = len; u-- > 0;) {
    acc += kc->eL[u] * ssd_dot(kc->StDy + u * N4, Ct + u * N4, N4);
    dl[u] = acc;
  }
  acc = 0.0f;
  for (size_t t = 0; t < len; t++) {
    dl[t] += acc;
    acc += kc->eE[t] * wo[t] * kc->xd[t];
  }
  for (size_t u = 1; u < len; u++) {
    float run = 0.0f;
    for (size_t s = 0; s < u; s++) {
      run += W1[u * Q4 + s] * wo[s] * DYX[u * Q4 + s];
      dl[s + 1] += run;
    }
  }

  /* dΔ and dλ: through lam, then through the weights (token s + 1's from wo_s) */
  float dA = 0.0f, dDSum = 0.0f;
  for (size_t s = len; s-- > 0;) {
    dA += dt[s] * dl[s];
    const float dw = dwo[s] + W1[s * Q4 + s] * DYX[s * Q4 + s];
    k->dDelta[t0 + s] += hd->A * dl[s] + k->lm[s] * dw;
    k->dLam[t0 + s] += dt[s] * dw;
    if (t0 + s + 1 < L) {
      const float dtn = s + 1 < len ? dt[s + 1] : next[0], lmcn = s + 1 < len ? k->lmc[s + 1] : next[1];
      k->dDelta[t0 + s + 1] += lmcn * dwo[s];
      k->dLam[t0 + s + 1] -= dtn * dwo[s];
    }
  }
  for (size_t s = 0; s < len; s++) dDSum += DYX[s * Q4 + s];
  sums[0] += dA;
  sums[1] += dDSum;
  if (a->rotates) chunk_angle_grads(d, k, len, eEall);
  chunk_unturn(a, d, k, b, h, t0, len, dtc);

  /* the adjoint of the carry entering the chunk */
  ssd_carry_adjoint(d, kc, len, eEall);
}

/* φ entering each chunk of (b, h): the forward's running sum, chunk by chunk. */
static void chunk_angles(const Mamba3Args* a, const SsdDims* d, const Work* k, size_t b, size_t h, float bias, float A, const int dtc) {
  const size_t K = m3_pairs(d), K4 = m3_pairs4(d);
  ssd_zero(k->angle, K4);
  for (size_t c = 0; c < d->chunks; c++) {
    const size_t t0 = c * d->Q, len = ssd_chunk_len(d, t0);
    for (size_t q = 0; q < K4; q++) k->phi0[c * K4 + q] = q < K ? k->angle[q] : 0.0f;
    ssd_chunk_dt(&a->s, d, b, h, t0, len, bias, A, k->dt, k->c.lam, 0, dtc);
    for (size_t i = 0; i < len; i++) m3_advance_angle(a, d, b * d->L + t0 + i, h, k->dt[i], k->angle, dtc);
  }
}

/* Every head of group g in batch b, in ascending order; then dB and dC of (b, g) written once. */
static void backward_group(const Mamba3Args* a, const SsdDims* d, const Work* k, size_t b, size_t g, const int dtc) {
  const size_t L = d->L, H = d->H, N = d->N, N4 = d->N4;
  ssd_zero(k->dBacc, L * N4);
  ssd_zero(k->dCacc, L * N4);
  for (size_t h = g * d->hpg; h < (g + 1) * d->hpg; h++) {
    const SsdHead hd = m3_head(a, d, h, k->bB, k->bC, dtc);
    float sums[2] = {0.0f, 0.0f};
    ssd_zero(k->c.dS, d->P * N4);
    ssd_zero(k->dbB, N4);
    ssd_zero(k->dcB, N4);
    ssd_zero(k->dDelta, L);
    ssd_zero(k->dLam, L);
    if (a->rotates) chunk_angles(a, d, k, b, h, hd.bias, hd.A, dtc);
    for (size_t c = d->chunks; c-- > 0;) backward_chunk(a, d, k, b, h, c, &hd, sums, dtc);
    /* dDt and dLambda of the raw inputs, tokens in order */
    float dDtSum = 0.0f;
    for (size_t t = 0; t < L; t++) {
      const size_t r = b * L + t;
      const float gr = k->dDelta[t] * ssd_sigmoid(kiln_load1(a->s.dt, r * d->ds + h, dtc) + hd.bias);
      kiln_store1(a->s.ddt, r * d->ds + h, gr, dtc);
      dDtSum += gr;
      const float v = kiln_load1(a->lambda, r * H + h, dtc);
      kiln_store1(a->dlambda, r * H + h, k->dLam[t] * ssd_sigmoid(v) * ssd_sigmoid(-v), dtc);
    }
    float* part = a->s.partials + (b * H + h) * M3_PARTIALS(N);
    part[0] = dDtSum;
    part[1] = hd.A * sums[0];
    part[2] = sums[1];
    for (size_t n = 0; n < N; n++) {
      part[3 + n] = k->dbB[n];
      part[3 + N + n] = k->dcB[n];
    }
  }
  for (size_t t = 0; t < L; t++) {
    const size_t at = (b * L + t) * d->bs + g * N;
    ssd_store_row(a->s.db, at, k->dBacc + t * N4, N, dtc);
    ssd_store_row(a->s.dc, at, k->dCacc + t * N4, N, dtc);
  }
}

KILN_INLINE void backward_range(const Mamba3Args* a, size_t i0, size_t i1, float* w, const int dtc) {
  const SsdDims d = ssd_dims(&a->s);
  Work k;
  work_at(w, &d, &k);
  for (size_t i = i0; i < i1; i++) backward_group(a, &d, &k, i / d.G, i % d.G, dtc);
}

KILN_EXPORT(kiln_mamba3_scan_backward)
void kiln_mamba3_scan_backward(const Mamba3Args* a, int thread, int nthreads) {
  SSD_RUN_RANGE(backward_range, a, &a->s, (size_t)a->s.batch * (size_t)a->s.groups, thread, nthreads);
}
