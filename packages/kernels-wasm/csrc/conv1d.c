/*
 * conv1d: conv1dCausalForward and conv1dCausalBackward, Mamba2's short convolution
 * (causal, depthwise over channels, K taps per channel).
 *
 *   x (B, T, C), token rows row_stride elements apart; weight (C, K); bias, dBias (C);
 *   out, dOut, dX (B, T, C) dense; dWeight (C, K); all of the storage dtype, except that
 *   dWeight and dBias may be f32 for a 16-bit storage dtype (grad_dtype).
 *   forward:  out[b,t,c] = bias[c] + sum_{j<K} w[c,j] x[b, t-(K-1)+j, c]      (x before t = 0 is 0)
 *   backward: dX[b,s,c]   = sum_{j<K, s+(K-1)-j < T} w[c,j] dOut[b, s+(K-1)-j, c]
 *             dW[c,j]    += sum_{b,t} dOut[b,t,c] x[b, t-(K-1)+j, c]
 *             dBias[c]   += sum_{b,t} dOut[b,t,c]
 *
 * Vectors run along channels (4 f32 lanes, a partial vector at the end of a row). Work
 * goes in blocks of CB channels: the block's weights are gathered once, transposed to
 * f32 wt[j][c], so each tap is one vector load.
 *
 * The forward splits the B*T rows among threads. The backward splits the channels (in
 * whole vectors): a thread owns its channels' dX, dWeight and dBias outright and sums the
 * parameter gradients over b then t, in f32 on the stack, adding each to dWeight / dBias
 * once at the end - the same bits on every call, whatever the thread count.
 */
#include "kiln_storage.h"

/* Channels per block; a multiple of 4. */
#define CB 64
/* Largest kernelSize (CONV1D_MAX_KERNEL_SIZE in @kiln/contract). */
#define KMAX 16

/* Host-written argument block; mirrored in src/backend-conv1d.ts. */
typedef struct {
  const void* x;
  const void* weight;
  const void* bias;   /* NULL: none */
  void* out;
  const void* dout;
  void* dx;
  void* dweight;
  void* dbias;        /* NULL: none */
  int32_t batch, seq_len, channels, kernel_size, row_stride;
  int32_t dtype;
  int32_t grad_dtype; /* backward: dWeight and dBias, dtype or KILN_DT_F32 */
} Conv1dArgs;

/* wt[j*CB + i] = weight[(c0+i)*K + j] as f32 for i < n, 0 past it; bs[i] = bias[c0+i] (0 without bias). */
KILN_INLINE void gather_block(const Conv1dArgs* g, size_t c0, size_t n, float* wt, float* bs, const int dt) {
  const size_t K = (size_t)g->kernel_size;
  for (size_t j = 0; j < K; j++) {
    for (size_t i = 0; i < CB; i++) wt[j * CB + i] = i < n ? kiln_load1(g->weight, (c0 + i) * K + j, dt) : 0.0f;
  }
  for (size_t i = 0; i < CB; i++) bs[i] = i < n && g->bias ? kiln_load1(g->bias, c0 + i, dt) : 0.0f;
}

#define LOADN(p, i, n, dt) ((n) == 4 ? kiln_load4((p), (i), (dt)) : kiln_load_partial((p), (i), (n), (dt), 0.0f))
#define STOREN(p, i, v, n, dt) ((n) == 4 ? kiln_store4((p), (i), (v), (dt)) : kiln_store_partial((p), (i), (v), (n), (dt)))

/* ---- forward ----------------------------------------------------------- */

KILN_INLINE void forward_rows(const Conv1dArgs* g, size_t r0, size_t r1, const int dt) {
  float wt[KMAX * CB] __attribute__((aligned(16)));
  float bs[CB] __attribute__((aligned(16)));
  const size_t T = (size_t)g->seq_len, C = (size_t)g->channels, K = (size_t)g->kernel_size, rs = (size_t)g->row_stride;
  const size_t es = dt == KILN_DT_F32 ? 4 : 2;
  for (size_t c0 = 0; c0 < C; c0 += CB) {
    const size_t nb = C - c0 < CB ? C - c0 : CB;
    gather_block(g, c0, nb, wt, bs, dt);
    for (size_t r = r0; r < r1; r++) {
      const size_t t = r % T;
      const size_t j0 = t >= K - 1 ? 0 : K - 1 - t; /* taps before t = 0 read zeros */
      /* x row of tap j: r - (K-1) + j */
      const char* xr = (const char*)g->x + (r + j0 - (K - 1)) * rs * es;
      char* out = (char*)g->out + r * C * es;
      for (size_t i = 0; i < nb; i += 4) {
        const size_t n = nb - i >= 4 ? 4 : nb - i;
        const size_t c = c0 + i;
        v128_t acc = wasm_v128_load(bs + i);
        const char* xj = xr;
        for (size_t j = j0; j < K; j++, xj += rs * es) acc = KILN_MADD(acc, wasm_v128_load(wt + j * CB + i), LOADN(xj, c, n, dt));
        STOREN(out, c, acc, n, dt);
      }
    }
  }
}

KILN_EXPORT(kiln_conv1d_causal_forward)
void kiln_conv1d_causal_forward(const Conv1dArgs* g, int thread, int nthreads) {
  size_t r0, r1;
  kiln_split((size_t)g->batch * (size_t)g->seq_len, 1, thread, nthreads, &r0, &r1);
  if (r0 >= r1) return;
  switch (g->dtype) {
    case KILN_DT_F32: forward_rows(g, r0, r1, KILN_DT_F32); break;
    case KILN_DT_BF16: forward_rows(g, r0, r1, KILN_DT_BF16); break;
    default: forward_rows(g, r0, r1, KILN_DT_F16); break;
  }
}

/* ---- backward ---------------------------------------------------------- */

/* dWeight / dBias of channels [c0, c0 + nb) += the block's f32 sums, in dtype gt: one rounding per element (none for f32). */
KILN_INLINE void add_param_grads(const Conv1dArgs* g, size_t c0, size_t nb, const float* sw, const float* sb, const int gt) {
  const size_t K = (size_t)g->kernel_size;
  for (size_t i = 0; i < nb; i++) {
    const size_t c = c0 + i;
    for (size_t j = 0; j < K; j++) kiln_store1(g->dweight, c * K + j, kiln_load1(g->dweight, c * K + j, gt) + sw[j * CB + i], gt);
    if (g->dbias) kiln_store1(g->dbias, c, kiln_load1(g->dbias, c, gt) + sb[i], gt);
  }
}

/* Channels [c0, c0 + nb) of one block, every (b, t): dX, and the block's dWeight / dBias sums. */
KILN_INLINE void backward_block(const Conv1dArgs* g, size_t c0, size_t nb, float* wt, float* bs, float* sw, float* sb, const int dt) {
  const size_t B = (size_t)g->batch, T = (size_t)g->seq_len, C = (size_t)g->channels, K = (size_t)g->kernel_size;
  const size_t rs = (size_t)g->row_stride;
  const size_t es = dt == KILN_DT_F32 ? 4 : 2;
  gather_block(g, c0, nb, wt, bs, dt);
  for (size_t i = 0; i < K * CB; i++) sw[i] = 0.0f;
  for (size_t i = 0; i < CB; i++) sb[i] = 0.0f;
  for (size_t b = 0; b < B; b++) {
    for (size_t t = 0; t < T; t++) {
      const size_t r = b * T + t;
      /* dWeight taps j >= j0 see x at row r - (K-1) + j; dX taps j >= k0 see dOut at row r + (K-1) - j */
      const size_t j0 = t >= K - 1 ? 0 : K - 1 - t;
      const size_t k0 = T - t >= K ? 0 : K - (T - t);
      const char* xr = (const char*)g->x + (r + j0 - (K - 1)) * rs * es;
      const char* dr = (const char*)g->dout + r * C * es;
      const char* dk = (const char*)g->dout + (r + (K - 1) - k0) * C * es;
      char* dx = (char*)g->dx + r * C * es;
      for (size_t i = 0; i < nb; i += 4) {
        const size_t n = nb - i >= 4 ? 4 : nb - i;
        const size_t c = c0 + i;
        const v128_t d = LOADN(dr, c, n, dt);
        wasm_v128_store(sb + i, wasm_f32x4_add(wasm_v128_load(sb + i), d));
        const char* xj = xr;
        for (size_t j = j0; j < K; j++, xj += rs * es) {
          float* s = sw + j * CB + i;
          wasm_v128_store(s, KILN_MADD(wasm_v128_load(s), d, LOADN(xj, c, n, dt)));
        }
        v128_t acc = wasm_f32x4_splat(0.0f);
        const char* dj = dk;
        for (size_t j = k0; j < K; j++, dj -= C * es) acc = KILN_MADD(acc, wasm_v128_load(wt + j * CB + i), LOADN(dj, c, n, dt));
        STOREN(dx, c, acc, n, dt);
      }
    }
  }
  if (g->grad_dtype == KILN_DT_F32) add_param_grads(g, c0, nb, sw, sb, KILN_DT_F32);
  else add_param_grads(g, c0, nb, sw, sb, dt);
}

KILN_INLINE void backward_channels(const Conv1dArgs* g, size_t c0, size_t c1, const int dt) {
  float wt[KMAX * CB] __attribute__((aligned(16)));
  float bs[CB] __attribute__((aligned(16)));
  float sw[KMAX * CB] __attribute__((aligned(16)));
  float sb[CB] __attribute__((aligned(16)));
  for (size_t c = c0; c < c1; c += CB) backward_block(g, c, c1 - c < CB ? c1 - c : CB, wt, bs, sw, sb, dt);
}

KILN_EXPORT(kiln_conv1d_causal_backward)
void kiln_conv1d_causal_backward(const Conv1dArgs* g, int thread, int nthreads) {
  size_t c0, c1;
  kiln_split((size_t)g->channels, 4, thread, nthreads, &c0, &c1);
  if (c0 >= c1) return;
  switch (g->dtype) {
    case KILN_DT_F32: backward_channels(g, c0, c1, KILN_DT_F32); break;
    case KILN_DT_BF16: backward_channels(g, c0, c1, KILN_DT_BF16); break;
    default: backward_channels(g, c0, c1, KILN_DT_F16); break;
  }
}
