/*
 * mamba3: what mamba3ScanForward (csrc/mamba3.c) and mamba3ScanBackward
 * (csrc/mamba3_backward.c) share: the argument block (ssdScan's, then Mamba3's own
 * operands), each token's weights and the chunk's B and C rows with their biases,
 * turned by the running angles. Rows, dots and the scalar math come from csrc/ssd.h, the
 * chunk work Mamba2 shares from csrc/ssd_chunk.h.
 *
 * Per (b, h), token t: Δ_t = softplus(dtRaw + dtBias[h]), λ_t = sigmoid(lambdaRaw),
 * A = -exp(aLog[h]). The kernels carry G_t = S_t + μ_t x_t B̄_t^T (μ_t = (1 - λ_{t+1}) Δ_{t+1},
 * 0 at the last token), which is Mamba2's scan with the input weight
 *   wo_t = λ_t Δ_t + μ_t    for the state (every later token and the carried state)
 *   wd_t = λ_t Δ_t          on the diagonal (token t's own output)
 * B̄_t = R(φ_t)(B[b,t,g] + bBias[h]), C̄_t likewise, φ_{t,k} = Σ_{r<=t} Δ_r θ[b,r,h,k]: pairs
 * (2k, 2k+1) turned by φ_{t,k} (re' = re cos - im sin, im' = re sin + im cos).
 * The angles are one f32 running sum over the sequence, in token order, by
 * m3_advance_angle: the backward repeats exactly the forward's additions.
 */
#ifndef KILN_MAMBA3_H
#define KILN_MAMBA3_H

#include "ssd_chunk.h"

/* Host-written argument block; mirrored in src/backend-mamba3.ts. */
typedef struct {
  SsdArgs s;            /* backward: s.partials is (batch, heads, M3_PARTIALS(N)) f32 */
  const void* lambda;   /* (batch, seqLen, heads) dense */
  const void* theta;    /* (batch, seqLen, heads, N/2) dense; read only when rotates */
  const void* b_bias;   /* (heads, N) */
  const void* c_bias;
  void* dlambda;
  void* dtheta;
  void* db_bias;        /* accumulate in s.grad_dtype */
  void* dc_bias;
  int32_t rotates;
} Mamba3Args;

_Static_assert(sizeof(SsdArgs) == 32 * 4, "backend-mamba3.ts puts Mamba3's fields from word 32");

/* Per (b, h): dDtBias, dALog, dD, then dBBias and dCBias (N each). */
#define M3_PARTIALS(N) (3 + 2 * (N))

/* Scratch carving: with base NULL only the count is kept (the host sizes the block from it). */
#define M3_TAKE(base, at, field, n) ((field) = (base) ? (base) + (at) : 0, (at) += (n))

/* Pairs of the rotation and their padded count. */
KILN_INLINE size_t m3_pairs(const SsdDims* d) { return d->N / 2; }
KILN_INLINE size_t m3_pairs4(const SsdDims* d) { return SSD_R4(d->N / 2); }

/* φ += Δ_t θ_t over the pairs, θ_t the (b, t, h) row of theta (r = b L + t). */
KILN_INLINE void m3_advance_angle(const Mamba3Args* a, const SsdDims* d, size_t r, size_t h, float dt, float* angle, const int dtc) {
  const size_t K = m3_pairs(d), at = (r * d->H + h) * K;
  for (size_t k = 0; k < K; k++) angle[k] += dt * kiln_load1(a->theta, at + k, dtc);
}

/* Pairs of u turned by (c, s) (sign +1) or by their inverse (sign -1). */
KILN_INLINE void m3_turn(float* u, const float* c, const float* s, size_t K, float sign) {
  for (size_t k = 0; k < K; k++) {
    const float re = u[2 * k], im = u[2 * k + 1], sn = sign * s[k];
    u[2 * k] = re * c[k] - im * sn;
    u[2 * k + 1] = re * sn + im * c[k];
  }
}

/*
 * Tokens [t0, t0 + len) of (b, h): dt and lam as ssd_chunk_dt,
 * lm = λ, lmc = 1 - λ (as sigmoid(-lambdaRaw), exact near λ = 1), wd and wo as above;
 * entries [len, Q4) are 0 (lam excepted). next[0], next[1]: Δ and 1 - λ of token t0 + len
 * (0 past the sequence), which the chunk's last μ needs.
 */
KILN_INLINE void m3_chunk_weights(const Mamba3Args* a, const SsdDims* d, size_t b, size_t h, size_t t0, size_t len, float bias, float A,
                                  float* dt, float* lam, float* lm, float* lmc, float* wd, float* wo, float next[2], const int dtc) {
  ssd_chunk_dt(&a->s, d, b, h, t0, len, bias, A, dt, lam, 0, dtc);
  for (size_t i = 0; i < d->Q4; i++) {
    if (i < len) {
      const float v = kiln_load1(a->lambda, (b * d->L + t0 + i) * d->H + h, dtc);
      lm[i] = ssd_sigmoid(v);
      lmc[i] = ssd_sigmoid(-v);
      wd[i] = lm[i] * dt[i];
    } else {
      lm[i] = lmc[i] = wd[i] = 0.0f;
    }
  }
  next[0] = next[1] = 0.0f;
  if (t0 + len < d->L) {
    const size_t r = b * d->L + t0 + len;
    next[0] = ssd_softplus(kiln_load1(a->s.dt, r * d->ds + h, dtc) + bias);
    next[1] = ssd_sigmoid(-kiln_load1(a->lambda, r * d->H + h, dtc));
  }
  for (size_t i = 0; i < d->Q4; i++) {
    if (i < len) {
      const float mu = i + 1 < len ? lmc[i + 1] * dt[i + 1] : next[1] * next[0];
      wo[i] = wd[i] + mu;
    } else {
      wo[i] = 0.0f;
    }
  }
}

/*
 * Rows B̄_i, C̄_i (N4 apart, zero-padded) of tokens [t0, t0 + len): B and C of head h's group
 * plus the head's bias rows bB, bC (N4, padded), turned when rotating: angle (K floats) holds
 * φ_{t0-1} on entry and φ_{t0+len-1} on return, cs / sn (K4 apart) each token's cos and sin.
 */
KILN_INLINE void m3_load_bc(const Mamba3Args* a, const SsdDims* d, size_t b, size_t h, size_t t0, size_t len, const float* dt,
                            const float* bB, const float* bC, float* angle, float* Bt, float* Ct, float* cs, float* sn, const int dtc) {
  const size_t N4 = d->N4, K = m3_pairs(d), K4 = m3_pairs4(d);
  ssd_load_bc(&a->s, d, b, h, t0, len, Bt, Ct, dtc);
  for (size_t i = 0; i < len; i++) {
    float *bt = Bt + i * N4, *ct = Ct + i * N4;
    ssd_axpy(bt, 1.0f, bB, N4);
    ssd_axpy(ct, 1.0f, bC, N4);
    if (!a->rotates) continue;
    m3_advance_angle(a, d, b * d->L + t0 + i, h, dt[i], angle, dtc);
    float *c = cs + i * K4, *s = sn + i * K4;
    for (size_t k = 0; k < K; k++) kiln_cos_sin((double)angle[k], &c[k], &s[k]);
    m3_turn(bt, c, s, K, 1.0f);
    m3_turn(ct, c, s, K, 1.0f);
  }
}

/* Head h's constants (ssd_head) and its bias rows as f32 (N4, padded). */
KILN_INLINE SsdHead m3_head(const Mamba3Args* a, const SsdDims* d, size_t h, float* bB, float* bC, const int dtc) {
  ssd_load_row(bB, a->b_bias, h * d->N, d->N, dtc);
  ssd_load_row(bC, a->c_bias, h * d->N, d->N, dtc);
  return ssd_head(&a->s, h, dtc);
}

#endif
