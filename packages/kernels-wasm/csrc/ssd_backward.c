/*
 * ssd_backward: ssdScanBackward, the reverse of csrc/ssd.c's chunked scan.
 *
 * Per (b, h), chunks in reverse, dS (the adjoint of the state leaving the chunk) from 0;
 * S = states[b,h,c], dt_s and lam_s recomputed, E = lam_{t1-1}, s <= t inside the chunk:
 *   CB[t][s] = C_t . B_s, dyx[t][s] = dy_t . x_s, W1 = exp(lam_t - lam_s) CB, W2 = exp(lam_t - lam_s) dyx
 *   dx_s  = D dy_s + dt_s [ sum_{t>=s} W1[t][s] dy_t + exp(E - lam_s) dS B_s ]
 *   dB_s += dt_s [ sum_{t>=s} W2[t][s] C_t + exp(E - lam_s) dS^T x_s ]
 *   dC_t += exp(lam_t) S^T dy_t + sum_{s<=t} W2[t][s] dt_s B_s
 *   ddt_s = sum_{t>=s} W1[t][s] dyx[t][s] + exp(E - lam_s) x_s^T dS B_s
 *   dlam: w = W1[t][s] dt_s dyx[t][s] (s < t) adds to dlam_t and takes from dlam_s;
 *         dlam_t += exp(lam_t) dy_t^T S C_t; q_s = exp(E - lam_s) dt_s x_s^T dS B_s adds to
 *         dlam_{t1-1} and takes from dlam_s; dlam_{t1-1} += exp(E) <dS, S>
 *   dl_s = sum_{k = s..t1-1} dlam_k; ddt_s += A dl_s; dA += dt_s dl_s
 *   dDt = ddt_s softplus'(dtRaw + dtBias); dS <- exp(E) dS + sum_t exp(lam_t) dy_t C_t^T
 * and over the sequence dDtBias[h] += sum dDt, dALog[h] += A dA, dD[h] += sum_t dy_t . x_t.
 *
 * Threads take ranges of the batch x groups (b, g) pairs. A pair's heads run in ascending
 * order and add their dB and dC into the pair's f32 rows in scratch, written out once at
 * the end (dB and dC are overwritten, their gaps never touched). Each (b, h) leaves its
 * three parameter-gradient sums in `partials`; kiln_ssd_scan_param_reduce adds them up
 * over b in order: the same bits whatever the thread count.
 */
#include "ssd.h"

typedef struct {
  float *X, *DY, *DX, *dSB;      /* Q x P4 */
  float *Bt, *Ct, *dSx, *StDy;   /* Q x N4 */
  float *W1, *W2, *DYX;          /* Q x Q4 */
  float *S, *dS;                 /* P x N4 */
  float *dBacc, *dCacc;          /* L x N4 */
  float* row;                    /* N4 */
  float *dt, *lam, *sig, *dlam, *ddt, *eE, *eL, *xd; /* Q4 */
} Work;

static Work work_at(float* w, const SsdDims* d) {
  const size_t Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  Work k;
  k.X = w, w += Q * P4;
  k.DY = w, w += Q * P4;
  k.DX = w, w += Q * P4;
  k.dSB = w, w += Q * P4;
  k.Bt = w, w += Q * N4;
  k.Ct = w, w += Q * N4;
  k.dSx = w, w += Q * N4;
  k.StDy = w, w += Q * N4;
  k.W1 = w, w += Q * Q4;
  k.W2 = w, w += Q * Q4;
  k.DYX = w, w += Q * Q4;
  k.S = w, w += d->P * N4;
  k.dS = w, w += d->P * N4;
  k.dBacc = w, w += d->L * N4;
  k.dCacc = w, w += d->L * N4;
  k.row = w, w += N4;
  k.dt = w, w += Q4;
  k.lam = w, w += Q4;
  k.sig = w, w += Q4;
  k.dlam = w, w += Q4;
  k.ddt = w, w += Q4;
  k.eE = w, w += Q4;
  k.eL = w, w += Q4;
  k.xd = w;
  return k;
}

/* One chunk [t0, t0 + len) of (b, h): dX and dDt of its tokens, its share of dB and dC, dS carried back. */
static void backward_chunk(const SsdArgs* a, const SsdDims* d, const Work* k, size_t b, size_t h, size_t c, float A, float bias,
                           float Dh, float sums[3], const int dtc) {
  const size_t L = d->L, H = d->H, P = d->P, N = d->N, Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  const size_t g = h / d->hpg, t0 = c * Q, len = L - t0 < Q ? L - t0 : Q;
  float *X = k->X, *DY = k->DY, *Bt = k->Bt, *Ct = k->Ct, *S = k->S, *dS = k->dS;
  float *W1 = k->W1, *W2 = k->W2, *DYX = k->DYX, *dt = k->dt, *lam = k->lam;

  const float* st = a->states + ((b * H + h) * d->chunks + c) * P * N;
  for (size_t p = 0; p < P; p++)
    for (size_t n = 0; n < N4; n++) S[p * N4 + n] = n < N ? st[p * N + n] : 0.0f;
  ssd_chunk_dt(a, d, b, h, t0, len, bias, A, dt, lam, k->sig, dtc);
  for (size_t i = 0; i < len; i++) {
    const size_t r = b * L + t0 + i;
    ssd_load_row(X + i * P4, a->x, r * d->xs + h * P, P, dtc);
    ssd_load_row(DY + i * P4, a->dy, (r * H + h) * P, P, dtc);
    ssd_load_row(Bt + i * N4, a->b, r * d->bs + g * N, N, dtc);
    ssd_load_row(Ct + i * N4, a->c, r * d->bs + g * N, N, dtc);
  }
  const float E = lam[len - 1], eEall = kiln_exp_f32(E);
  for (size_t s = 0; s < len; s++) {
    k->eE[s] = kiln_exp_f32(E - lam[s]);
    k->eL[s] = kiln_exp_f32(lam[s]);
  }

  /* W1, W2, dyx over s <= t (lanes past t are not read) */
  for (size_t t = 0; t < len; t++) {
    float *w1 = W1 + t * Q4, *w2 = W2 + t * Q4, *yx = DYX + t * Q4;
    ssd_dots(Ct + t * N4, Bt, N4, t + 1, N4, w1);
    ssd_dots(DY + t * P4, X, P4, t + 1, P4, yx);
    const v128_t lt = wasm_f32x4_splat(lam[t]);
    for (size_t s = 0; s <= t; s += 4) {
      const v128_t dec = kiln_exp_f32x4(wasm_f32x4_sub(lt, wasm_v128_load(lam + s)));
      wasm_v128_store(w1 + s, wasm_f32x4_mul(wasm_v128_load(w1 + s), dec));
      wasm_v128_store(w2 + s, wasm_f32x4_mul(wasm_v128_load(yx + s), dec));
    }
  }
  /* dS B_s (over n), dS^T x_s and S^T dy_t (over p) */
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

  /* dX */
  for (size_t s = 0; s < len; s++) {
    float* dx = k->DX + s * P4;
    ssd_zero(dx, P4);
    ssd_axpy(dx, k->eE[s], k->dSB + s * P4, P4);
    ssd_gemv(dx, P4, W1 + s * Q4 + s, Q4, 0, DY + s * P4, P4, len - s);
    ssd_scale(dx, dt[s], P4);
    ssd_axpy(dx, Dh, DY + s * P4, P4);
    ssd_store_row(a->dx, (b * L + t0 + s) * d->xs + h * P, dx, P, dtc);
  }
  /* this head's dB and dC */
  for (size_t s = 0; s < len; s++) {
    ssd_zero(k->row, N4);
    ssd_axpy(k->row, k->eE[s], k->dSx + s * N4, N4);
    ssd_gemv(k->row, N4, W2 + s * Q4 + s, Q4, 0, Ct + s * N4, N4, len - s);
    ssd_axpy(k->dBacc + (t0 + s) * N4, dt[s], k->row, N4);
  }
  for (size_t t = 0; t < len; t++) {
    ssd_zero(k->row, N4);
    ssd_axpy(k->row, k->eL[t], k->StDy + t * N4, N4);
    ssd_gemv(k->row, N4, W2 + t * Q4, 1, dt, Bt, N4, t + 1);
    ssd_axpy(k->dCacc + (t0 + t) * N4, 1.0f, k->row, N4);
  }

  /* ddt and dlam */
  float* ddt = k->ddt;
  float* dlam = k->dlam;
  for (size_t s = 0; s < len; s++) {
    float v = k->eE[s] * k->xd[s];
    for (size_t t = s; t < len; t++) v += W1[t * Q4 + s] * DYX[t * Q4 + s];
    ddt[s] = v;
    dlam[s] = 0.0f;
  }
  for (size_t t = 0; t < len; t++) {
    for (size_t s = 0; s < t; s++) {
      const float w = W1[t * Q4 + s] * dt[s] * DYX[t * Q4 + s];
      dlam[t] += w;
      dlam[s] -= w;
    }
    dlam[t] += k->eL[t] * ssd_dot(k->StDy + t * N4, Ct + t * N4, N4);
  }
  for (size_t s = 0; s < len; s++) {
    const float q = k->eE[s] * dt[s] * k->xd[s];
    dlam[len - 1] += q;
    dlam[s] -= q;
  }
  dlam[len - 1] += eEall * ssd_dot(dS, S, P * N4);
  float dl = 0.0f, dA = 0.0f;
  for (size_t s = len; s-- > 0;) {
    dl += dlam[s];
    ddt[s] += A * dl;
    dA += dt[s] * dl;
  }
  float dDtSum = 0.0f, dDSum = 0.0f;
  for (size_t s = 0; s < len; s++) {
    const float gr = ddt[s] * k->sig[s];
    kiln_store1(a->ddt, (b * L + t0 + s) * d->ds + h, gr, dtc);
    dDtSum += gr;
    dDSum += DYX[s * Q4 + s];
  }
  sums[0] += dDtSum;
  sums[1] += dA;
  sums[2] += dDSum;

  /* the adjoint of the state entering the chunk */
  for (size_t p = 0; p < P; p++) {
    float* row = dS + p * N4;
    ssd_scale(row, eEall, N4);
    ssd_gemv(row, N4, DY + p, P4, k->eL, Ct, N4, len);
  }
}

/* Every head of group g in batch b, in ascending order; then dB and dC of (b, g) written once. */
static void backward_group(const SsdArgs* a, const SsdDims* d, const Work* k, size_t b, size_t g, const int dtc) {
  const size_t L = d->L, N = d->N, N4 = d->N4;
  ssd_zero(k->dBacc, L * N4);
  ssd_zero(k->dCacc, L * N4);
  for (size_t h = g * d->hpg; h < (g + 1) * d->hpg; h++) {
    const float A = -kiln_exp_f32(kiln_load1(a->a_log, h, dtc));
    const float bias = kiln_load1(a->dt_bias, h, dtc);
    const float Dh = kiln_load1(a->d, h, dtc);
    float sums[3] = {0.0f, 0.0f, 0.0f};
    ssd_zero(k->dS, d->P * N4);
    for (size_t c = d->chunks; c-- > 0;) backward_chunk(a, d, k, b, h, c, A, bias, Dh, sums, dtc);
    float* part = a->partials + (b * d->H + h) * 3;
    part[0] = sums[0];
    part[1] = A * sums[1];
    part[2] = sums[2];
  }
  for (size_t t = 0; t < L; t++) {
    const size_t at = (b * L + t) * d->bs + g * N;
    ssd_store_row(a->db, at, k->dBacc + t * N4, N, dtc);
    ssd_store_row(a->dc, at, k->dCacc + t * N4, N, dtc);
  }
}

KILN_INLINE void backward_range(const SsdArgs* a, size_t i0, size_t i1, float* w, const int dtc) {
  const SsdDims d = ssd_dims(a);
  const Work k = work_at(w, &d);
  for (size_t i = i0; i < i1; i++) backward_group(a, &d, &k, i / d.G, i % d.G, dtc);
}

KILN_EXPORT(kiln_ssd_scan_backward)
void kiln_ssd_scan_backward(const SsdArgs* a, int thread, int nthreads) {
  size_t i0, i1;
  kiln_split((size_t)a->batch * (size_t)a->groups, 1, thread, nthreads, &i0, &i1);
  if (i0 >= i1) return;
  float* w = a->scratch + (size_t)thread * (size_t)a->scratch_stride;
  switch (a->dtype) {
    case KILN_DT_F32: backward_range(a, i0, i1, w, KILN_DT_F32); break;
    case KILN_DT_BF16: backward_range(a, i0, i1, w, KILN_DT_BF16); break;
    default: backward_range(a, i0, i1, w, KILN_DT_F16); break;
  }
}
