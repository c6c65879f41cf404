/*
 * ssd: ssdScanForward, Mamba2's selective state space scan computed chunk by chunk, and
 * the reduction of ssdScanBackward's per-(batch, head) parameter gradients (the backward
 * itself is csrc/ssd_backward.c; shared pieces in csrc/ssd.h).
 *
 * Per batch b and head h (group g = h / (heads / groups)), with dt_t = softplus(dtRaw + dtBias[h]),
 * A = -exp(aLog[h]) and, inside a chunk of tokens [t0, t1), lam_s = sum_{r = t0..s} dt_r A:
 *   states[b,h,c] = S, the state entering the chunk (P x N, f32)
 *   y_t = D x_t + exp(lam_t) S C_t + sum_{s = t0..t} exp(lam_t - lam_s) (C_t . B_s) dt_s x_s
 *   S  <- exp(lam_{t1-1}) S + sum_s exp(lam_{t1-1} - lam_s) dt_s x_s B_s^T
 * Every exponent is <= 0. The chunk's x, B and C rows are converted to f32 once, into the
 * thread's scratch; dot products over n and axpys over p and n run on f32x4 lanes.
 *
 * Threads take ranges of the batch x heads (b, h) pairs; each pair is one thread's
 * sequential work, so the bits do not depend on the thread count.
 */
#include "ssd.h"

KILN_EXPORT(kiln_ssd_scan_scratch_floats)
uint32_t kiln_ssd_scan_scratch_floats(int seq_len, int head_dim, int state_size, int chunk_size, int backward) {
  SsdArgs a = {0};
  a.seq_len = seq_len;
  a.heads = a.groups = 1;
  a.head_dim = head_dim;
  a.state_size = state_size;
  a.chunk_size = chunk_size;
  const SsdDims d = ssd_dims(&a);
  return (uint32_t)ssd_scratch_floats(&d, backward);
}

/* ---- forward ------------------------------------------------------------------- */

static void forward_head(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, float* w, const int dtc) {
  const size_t L = d->L, H = d->H, P = d->P, N = d->N, Q = d->Q, P4 = d->P4, N4 = d->N4, Q4 = d->Q4;
  float* X = w;
  float* Bt = X + Q * P4;
  float* Ct = Bt + Q * N4;
  float* W = Ct + Q * N4;
  float* S = W + Q * Q4;
  float* yrow = S + P * N4;
  float* dt = yrow + P4;
  float* lam = dt + Q4;
  float* coef = lam + Q4;
  const size_t g = h / d->hpg;
  const float A = -kiln_exp_f32(kiln_load1(a->a_log, h, dtc));
  const float bias = kiln_load1(a->dt_bias, h, dtc);
  const float Dh = kiln_load1(a->d, h, dtc);
  ssd_zero(S, P * N4);
  for (size_t c = 0; c < d->chunks; c++) {
    const size_t t0 = c * Q, len = L - t0 < Q ? L - t0 : Q;
    float* st = a->states + ((b * H + h) * d->chunks + c) * P * N;
    for (size_t p = 0; p < P; p++)
      for (size_t n = 0; n < N; n++) st[p * N + n] = S[p * N4 + n];
    ssd_chunk_dt(a, d, b, h, t0, len, bias, A, dt, lam, 0, dtc);
    for (size_t i = 0; i < len; i++) {
      const size_t r = b * L + t0 + i;
      ssd_load_row(X + i * P4, a->x, r * d->xs + h * P, P, dtc);
      ssd_load_row(Bt + i * N4, a->b, r * d->bs + g * N, N, dtc);
      ssd_load_row(Ct + i * N4, a->c, r * d->bs + g * N, N, dtc);
    }
    for (size_t t = 0; t < len; t++) {
      /* W[t][s] = exp(lam_t - lam_s) (C_t . B_s) dt_s, s <= t (lanes past t are not read) */
      float* wr = W + t * Q4;
      const float* ct = Ct + t * N4;
      ssd_dots(ct, Bt, N4, t + 1, N4, wr);
      const v128_t lt = wasm_f32x4_splat(lam[t]);
      for (size_t s = 0; s <= t; s += 4) {
        const v128_t dec = kiln_exp_f32x4(wasm_f32x4_sub(lt, wasm_v128_load(lam + s)));
        wasm_v128_store(wr + s, wasm_f32x4_mul(wasm_f32x4_mul(wasm_v128_load(wr + s), dec), wasm_v128_load(dt + s)));
      }
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
    for (size_t s = 0; s < len; s++) coef[s] = kiln_exp_f32(E - lam[s]) * dt[s];
    for (size_t p = 0; p < P; p++) {
      float* row = S + p * N4;
      ssd_scale(row, eE, N4);
      ssd_gemv(row, N4, X + p, P4, coef, Bt, N4, len);
    }
  }
}

KILN_INLINE void forward_range(const SsdArgs* a, size_t i0, size_t i1, float* w, const int dtc) {
  const SsdDims d = ssd_dims(a);
  for (size_t i = i0; i < i1; i++) forward_head(a, &d, i / d.H, i % d.H, w, dtc);
}

KILN_EXPORT(kiln_ssd_scan_forward)
void kiln_ssd_scan_forward(const SsdArgs* a, int thread, int nthreads) {
  size_t i0, i1;
  kiln_split((size_t)a->batch * (size_t)a->heads, 1, thread, nthreads, &i0, &i1);
  if (i0 >= i1) return;
  float* w = a->scratch + (size_t)thread * (size_t)a->scratch_stride;
  switch (a->dtype) {
    case KILN_DT_F32: forward_range(a, i0, i1, w, KILN_DT_F32); break;
    case KILN_DT_BF16: forward_range(a, i0, i1, w, KILN_DT_BF16); break;
    default: forward_range(a, i0, i1, w, KILN_DT_F16); break;
  }
}

/* ---- the backward's parameter gradients ------------------------------------------ */

/*
 * dDtBias[h], dALog[h], dD[h] += the sums over b (ascending) of the backward's per-(b, h)
 * partials, in f32, each added to its output once. Threads take ranges of heads.
 */
KILN_EXPORT(kiln_ssd_scan_param_reduce)
void kiln_ssd_scan_param_reduce(const SsdArgs* a, int thread, int nthreads) {
  size_t h0, h1;
  const size_t H = (size_t)a->heads, B = (size_t)a->batch;
  kiln_split(H, 1, thread, nthreads, &h0, &h1);
  const int gt = a->grad_dtype;
  void* outs[3] = {a->ddt_bias, a->da_log, a->dd};
  for (size_t h = h0; h < h1; h++) {
    for (size_t k = 0; k < 3; k++) {
      float s = 0.0f;
      for (size_t b = 0; b < B; b++) s += a->partials[(b * H + h) * 3 + k];
      kiln_store1(outs[k], h, kiln_load1(outs[k], h, gt) + s, gt);
    }
  }
}
