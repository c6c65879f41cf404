/*
 * ssd: ssdScanForward, Mamba2's selective state space scan computed chunk by chunk, and
 * the reduction of ssdScanBackward's per-(batch, head) parameter gradients (the backward
 * itself is csrc/ssd_backward.c; shared pieces in csrc/ssd.h and csrc/ssd_chunk.h).
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
#include "ssd_chunk.h"

KILN_EXPORT(kiln_ssd_scan_scratch_floats)
uint32_t kiln_ssd_scan_scratch_floats(int seq_len, int head_dim, int state_size, int chunk_size, int backward) {
  const SsdDims d = ssd_scratch_dims(seq_len, head_dim, state_size, chunk_size);
  return (uint32_t)ssd_scratch_floats(&d, backward);
}

/* ---- forward ------------------------------------------------------------------- */

static void forward_head(const SsdArgs* a, const SsdDims* d, size_t b, size_t h, float* w, const int dtc) {
  const size_t Q = d->Q, Q4 = d->Q4;
  SsdForwardChunk k; /* the layout ssd_scratch_floats counts */
  k.X = w;
  k.Bt = k.X + Q * d->P4;
  k.Ct = k.Bt + Q * d->N4;
  k.W = k.Ct + Q * d->N4;
  k.S = k.W + Q * Q4;
  k.yrow = k.S + d->P * d->N4;
  float* dt = k.yrow + d->P4;
  k.lam = dt + Q4;
  k.coef = k.lam + Q4;
  const SsdHead hd = ssd_head(a, h, dtc);
  ssd_zero(k.S, d->P * d->N4);
  for (size_t c = 0; c < d->chunks; c++) {
    const size_t t0 = c * Q, len = ssd_chunk_len(d, t0);
    ssd_save_state(a, d, b, h, c, k.S);
    ssd_chunk_dt(a, d, b, h, t0, len, hd.bias, hd.A, dt, k.lam, 0, dtc);
    ssd_load_x(a, d, b, h, t0, len, k.X, 0, dtc);
    ssd_load_bc(a, d, b, h, t0, len, k.Bt, k.Ct, dtc);
    ssd_forward_chunk(a, d, &k, b, h, t0, len, hd.Dh, dt, 0, dtc);
  }
}

KILN_INLINE void forward_range(const SsdArgs* a, size_t i0, size_t i1, float* w, const int dtc) {
  const SsdDims d = ssd_dims(a);
  for (size_t i = i0; i < i1; i++) forward_head(a, &d, i / d.H, i % d.H, w, dtc);
}

KILN_EXPORT(kiln_ssd_scan_forward)
void kiln_ssd_scan_forward(const SsdArgs* a, int thread, int nthreads) {
  SSD_RUN_RANGE(forward_range, a, a, (size_t)a->batch * (size_t)a->heads, thread, nthreads);
}

/* ---- the backward's parameter gradients ------------------------------------------ */

/* dDtBias, dALog, dD: ssd_param_reduce (csrc/ssd.h). */
KILN_EXPORT(kiln_ssd_scan_param_reduce)
void kiln_ssd_scan_param_reduce(const SsdArgs* a, int thread, int nthreads) { ssd_param_reduce(a, 0, 0, thread, nthreads); }
