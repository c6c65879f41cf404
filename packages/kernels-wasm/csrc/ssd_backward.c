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
#include "ssd_chunk.h"

typedef struct {
  SsdBackwardChunk c;
  float* DX;                 /* Q x P4 */
  float *dBacc, *dCacc;      /* L x N4 */
  float* row;                /* N4 */
  float *dt, *sig, *dlam, *ddt; /* Q4 */
} Work;

/* The layout ssd_scratch_floats counts. */
static Work work_at(float* w, const SsdDims* d) {
  const size_t Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  Work k;
  k.c.X = w, w += Q * P4;
  k.c.DY = w, w += Q * P4;
  k.DX = w, w += Q * P4;
  k.c.dSB = w, w += Q * P4;
  k.c.Bt = w, w += Q * N4;
  k.c.Ct = w, w += Q * N4;
  k.c.dSx = w, w += Q * N4;
  k.c.StDy = w, w += Q * N4;
  k.c.W1 = w, w += Q * Q4;
  k.c.W2 = w, w += Q * Q4;
  k.c.DYX = w, w += Q * Q4;
  k.c.S = w, w += d->P * N4;
  k.c.dS = w, w += d->P * N4;
  k.dBacc = w, w += d->L * N4;
  k.dCacc = w, w += d->L * N4;
  k.row = w, w += N4;
  k.dt = w, w += Q4;
  k.c.lam = w, w += Q4;
  k.sig = w, w += Q4;
  k.dlam = w, w += Q4;
  k.ddt = w, w += Q4;
  k.c.eE = w, w += Q4;
  k.c.eL = w, w += Q4;
  k.c.xd = w;
  return k;
}

/* One chunk [t0, t0 + len) of (b, h): dX and dDt of its tokens, its share of dB and dC, dS carried back. */
static void backward_chunk(const SsdArgs* a, const SsdDims* d, const Work* k, size_t b, size_t h, size_t c, const SsdHead* hd, float sums[3],
                           const int dtc) {
  const size_t L = d->L, P = d->P, Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  const size_t t0 = c * Q, len = ssd_chunk_len(d, t0);
  const SsdBackwardChunk* kc = &k->c;
  float *DY = kc->DY, *Bt = kc->Bt, *Ct = kc->Ct, *S = kc->S, *dS = kc->dS;
  float *W1 = kc->W1, *W2 = kc->W2, *DYX = kc->DYX, *dt = k->dt, *lam = kc->lam;

  ssd_load_state(a, d, b, h, c, S);
  ssd_chunk_dt(a, d, b, h, t0, len, hd->bias, hd->A, dt, lam, k->sig, dtc);
  ssd_load_x(a, d, b, h, t0, len, kc->X, DY, dtc);
  ssd_load_bc(a, d, b, h, t0, len, Bt, Ct, dtc);
  const float eEall = ssd_backward_products(d, kc, len);

  /* dX */
  for (size_t s = 0; s < len; s++) {
    float* dx = k->DX + s * P4;
    ssd_zero(dx, P4);
    ssd_axpy(dx, kc->eE[s], kc->dSB + s * P4, P4);
    ssd_gemv(dx, P4, W1 + s * Q4 + s, Q4, 0, DY + s * P4, P4, len - s);
    ssd_scale(dx, dt[s], P4);
    ssd_axpy(dx, hd->Dh, DY + s * P4, P4);
    ssd_store_row(a->dx, (b * L + t0 + s) * d->xs + h * P, dx, P, dtc);
  }
  /* this head's dB and dC */
  for (size_t s = 0; s < len; s++) {
    ssd_zero(k->row, N4);
    ssd_axpy(k->row, kc->eE[s], kc->dSx + s * N4, N4);
    ssd_gemv(k->row, N4, W2 + s * Q4 + s, Q4, 0, Ct + s * N4, N4, len - s);
    ssd_axpy(k->dBacc + (t0 + s) * N4, dt[s], k->row, N4);
  }
  for (size_t t = 0; t < len; t++) {
    ssd_zero(k->row, N4);
    ssd_axpy(k->row, kc->eL[t], kc->StDy + t * N4, N4);
    ssd_gemv(k->row, N4, W2 + t * Q4, 1, dt, Bt, N4, t + 1);
    ssd_axpy(k->dCacc + (t0 + t) * N4, 1.0f, k->row, N4);
  }

  /* ddt and dlam */
  float* ddt = k->ddt;
  float* dlam = k->dlam;
  for (size_t s = 0; s < len; s++) {
    float v = kc->eE[s] * kc->xd[s];
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
    dlam[t] += kc->eL[t] * ssd_dot(kc->StDy + t * N4, Ct + t * N4, N4);
  }
  for (size_t s = 0; s < len; s++) {
    const float q = kc->eE[s] * dt[s] * kc->xd[s];
    dlam[len - 1] += q;
    dlam[s] -= q;
  }
  dlam[len - 1] += eEall * ssd_dot(dS, S, P * N4);
  float dl = 0.0f, dA = 0.0f;
  for (size_t s = len; s-- > 0;) {
    dl += dlam[s];
    ddt[s] += hd->A * dl;
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
  ssd_carry_adjoint(d, kc, len, eEall);
}

/* Every head of group g in batch b, in ascending order; then dB and dC of (b, g) written once. */
static void backward_group(const SsdArgs* a, const SsdDims* d, const Work* k, size_t b, size_t g, const int dtc) {
  const size_t L = d->L, N = d->N, N4 = d->N4;
  ssd_zero(k->dBacc, L * N4);
  ssd_zero(k->dCacc, L * N4);
  for (size_t h = g * d->hpg; h < (g + 1) * d->hpg; h++) {
    const SsdHead hd = ssd_head(a, h, dtc);
    float sums[3] = {0.0f, 0.0f, 0.0f};
    ssd_zero(k->c.dS, d->P * N4);
    for (size_t c = d->chunks; c-- > 0;) backward_chunk(a, d, k, b, h, c, &hd, sums, dtc);
    float* part = a->partials + (b * d->H + h) * 3;
    part[0] = sums[0];
    part[1] = hd.A * sums[1];
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
  SSD_RUN_RANGE(backward_range, a, a, (size_t)a->batch * (size_t)a->groups, thread, nthreads);
}
