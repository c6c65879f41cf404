/*
 * norm: LayerNorm and RMSNorm over the last dimension, forward and backward.
 *
 * x, out, dOut, dX are (rows, dim) row-major; weight, bias, dWeight, dBias are (dim);
 * all of the storage dtype (f32, bf16 or f16), except that dWeight and dBias may be
 * f32 for a 16-bit storage dtype (grad_dtype). mean and rstd are f32 (rows).
 *
 *   layerNorm forward:  mean = sum_j x_j / dim
 *                       rstd = 1 / sqrt(sum_j (x_j - mean)^2 / dim + eps)     (two passes over the row)
 *                       out_j = (x_j - mean) rstd w_j (+ b_j)
 *   rmsNorm forward:    rstd = 1 / sqrt(sum_j x_j^2 / dim + eps);  out_j = x_j rstd w_j
 *   w_j is weight_j + weight_offset (Gemma's RMSNorm stores weight - 1; 0 otherwise),
 *   the sum taken in f32
 *   with a residual, both forwards first write sum_j = x_j + residual_j rounded to the
 *   dtype, and normalize the sum's row (an add and the norm in one pass over the rows)
 *   backward, with xhat_j = (x_j - mean) rstd (mean = 0 for rmsNorm) and g_j = dOut_j w_j:
 *                       dX_j = dRes_j + rstd (g_j - mean(g) - xhat_j mean(g xhat))     (rmsNorm: no mean(g) term;
 *                       dRes, the residual stream's gradient, is 0 when absent; dX may alias it)
 *                       dWeight_j += sum_r dOut_rj xhat_rj,  dBias_j += sum_r dOut_rj
 *                       dXColSums_j += sum_r dX_rj (dX as stored; when asked for)
 *
 * Threads take contiguous ranges of rows. out may alias x: a row's statistics are
 * computed before any of it is written, and each element is read before it is
 * written. For bf16 / f16 rows of up to STAGE_MAX elements, each thread widens
 * weight and bias to f32 once, and each row's inputs once, into stack buffers:
 * the passes over a row then read f32.
 *
 * The backward's parameter gradients are sums over rows: thread t adds its rows
 * into its own f32 partial row in scratch (scratch + t * scratch_stride floats:
 * dWeight in [0, dim4), dBias in [dim4, 2 dim4), dX's column sums in [2 dim4, 3 dim4),
 * dim4 = dim rounded up to 4), then a
 * second call, kiln_norm_param_grad_reduce, splits the columns among threads and
 * adds the partials to dWeight / dBias in thread order 0, 1, ... - the same result on
 * every run with the same thread count.
 */
#include "kiln_storage.h"

typedef struct {
  int32_t rows;
  int32_t dim;
  int32_t dtype;        /* KILN_DT_F32, KILN_DT_BF16, KILN_DT_F16 */
  float eps;
  const void* x;
  const void* weight;
  const void* bias;     /* NULL: no bias (and always NULL for rmsNorm) */
  void* out;
  float* mean;          /* NULL for rmsNorm */
  float* rstd;
  const void* residual; /* NULL: normalize x itself */
  void* sum;            /* x + residual (with residual) */
  float weight_offset;  /* added to every weight */
} NormForwardArgs;

typedef struct {
  int32_t rows;
  int32_t dim;
  int32_t dtype;
  int32_t partials;     /* threads that ran the backward: partial rows to reduce */
  const void* dout;
  const void* x;
  const void* weight;
  const float* mean;    /* NULL for rmsNorm */
  const float* rstd;
  void* dx;
  void* dweight;
  void* dbias;          /* NULL: no dBias */
  float* scratch;
  uint32_t scratch_stride; /* floats per thread, >= 2 * dim4 (3 * dim4 with dxsums) */
  int32_t grad_dtype;   /* dWeight and dBias: dtype, or KILN_DT_F32 */
  const void* dres;     /* NULL: no residual gradient added to dX */
  void* dxsums;         /* NULL: dX's column sums not asked for (grad_dtype) */
  float weight_offset;  /* added to every weight */
} NormBackwardArgs;

#define LOAD(p, j, n, dt) ((n) == 4 ? kiln_load4((p), (j), (dt)) : kiln_load_partial((p), (j), (n), (dt), 0.0f))
#define STORE(p, j, v, n, dt) ((n) == 4 ? kiln_store4((p), (j), (v), (dt)) : kiln_store_partial((p), (j), (v), (n), (dt)))

/* Longest bf16 / f16 row widened to f32 on the stack (three rows of it: 48 KiB). */
#define STAGE_MAX 4096

/* dst[0, n) = src[0, n) widened to f32. */
KILN_INLINE void widen(float* dst, const void* src, size_t n, const int dt) {
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    v128_t lo, hi;
    kiln_load8(src, k, dt, &lo, &hi);
    wasm_v128_store(dst + k, lo);
    wasm_v128_store(dst + k + 4, hi);
  }
  for (; k < n; k++) dst[k] = kiln_load1(src, k, dt);
}

/* ---- forward ----------------------------------------------------------- */

/*
 * One row: x, w, b (b may be NULL) of dtype in_dt, out of dtype out_dt.
 * Returns mean (0 for rmsNorm) and rstd through the pointers.
 */
KILN_INLINE void forward_row(const void* x, const void* w, const void* b, void* out, size_t dim, float eps, float w_offset, const int layer,
                             float* mean_out, float* rstd_out, const int in_dt, const int out_dt) {
  const size_t body = dim & ~(size_t)3;
  const int tail = (int)(dim - body);
  const float inv_dim = 1.0f / (float)dim;
  float mean = 0.0f;
  if (layer) {
    v128_t s0 = wasm_f32x4_splat(0.0f), s1 = s0;
    size_t j = 0;
    for (; j + 8 <= body; j += 8) {
      s0 = wasm_f32x4_add(s0, kiln_load4(x, j, in_dt));
      s1 = wasm_f32x4_add(s1, kiln_load4(x, j + 4, in_dt));
    }
    if (j < body) s0 = wasm_f32x4_add(s0, kiln_load4(x, j, in_dt));
    if (tail) s1 = wasm_f32x4_add(s1, kiln_load_partial(x, body, tail, in_dt, 0.0f));
    mean = kiln_hsum(wasm_f32x4_add(s0, s1)) * inv_dim;
  }
  /* sum of squared deviations from the mean (of squares, for rmsNorm) */
  const v128_t vmean = wasm_f32x4_splat(mean);
  v128_t q0 = wasm_f32x4_splat(0.0f), q1 = q0;
  size_t j = 0;
  for (; j + 8 <= body; j += 8) {
    const v128_t d0 = wasm_f32x4_sub(kiln_load4(x, j, in_dt), vmean);
    const v128_t d1 = wasm_f32x4_sub(kiln_load4(x, j + 4, in_dt), vmean);
    q0 = KILN_MADD(q0, d0, d0);
    q1 = KILN_MADD(q1, d1, d1);
  }
  if (j < body) {
    const v128_t d0 = wasm_f32x4_sub(kiln_load4(x, j, in_dt), vmean);
    q0 = KILN_MADD(q0, d0, d0);
  }
  if (tail) {
    /* lanes past the row load the mean itself: they add 0 */
    const v128_t d1 = wasm_f32x4_sub(kiln_load_partial(x, body, tail, in_dt, mean), vmean);
    q1 = KILN_MADD(q1, d1, d1);
  }
  const float rstd = 1.0f / __builtin_sqrtf(kiln_hsum(wasm_f32x4_add(q0, q1)) * inv_dim + eps);
  *mean_out = mean;
  *rstd_out = rstd;

  const v128_t vrstd = wasm_f32x4_splat(rstd);
  const v128_t voff = wasm_f32x4_splat(w_offset);
  for (size_t k = 0; k < dim; k += 4) {
    const int n = dim - k >= 4 ? 4 : (int)(dim - k);
    const v128_t xhat = wasm_f32x4_mul(wasm_f32x4_sub(LOAD(x, k, n, in_dt), vmean), vrstd);
    v128_t y = wasm_f32x4_mul(xhat, wasm_f32x4_add(LOAD(w, k, n, in_dt), voff));
    if (b) y = wasm_f32x4_add(y, LOAD(b, k, n, in_dt));
    STORE(out, k, y, n, out_dt);
  }
}

/*
 * Row r of the values to normalize: x's, or with a residual the row of sum, written
 * first as x + residual rounded to dt (each element read before it is written, so sum
 * may alias x or residual).
 */
KILN_INLINE const void* input_row(const NormForwardArgs* a, size_t r, size_t dim, const int dt) {
  const size_t o = r * dim * (dt == KILN_DT_F32 ? 4 : 2);
  if (!a->residual) return (const char*)a->x + o;
  const void* x = (const char*)a->x + o;
  const void* res = (const char*)a->residual + o;
  void* sum = (char*)a->sum + o;
  for (size_t k = 0; k < dim; k += 4) {
    const int n = dim - k >= 4 ? 4 : (int)(dim - k);
    STORE(sum, k, wasm_f32x4_add(LOAD(x, k, n, dt), LOAD(res, k, n, dt)), n, dt);
  }
  return sum;
}

KILN_INLINE void forward_rows(const NormForwardArgs* a, size_t r0, size_t r1, const int layer, const int dt) {
  const size_t dim = (size_t)a->dim;
  const size_t esize = dt == KILN_DT_F32 ? 4 : 2;
  for (size_t r = r0; r < r1; r++) {
    float mean, rstd;
    forward_row(input_row(a, r, dim, dt), a->weight, a->bias, (char*)a->out + r * dim * esize, dim, a->eps, a->weight_offset, layer, &mean, &rstd, dt, dt);
    if (layer) a->mean[r] = mean;
    a->rstd[r] = rstd;
  }
}

/* bf16 / f16 rows of at most STAGE_MAX: weight, bias and each row read as f32 from the stack. */
KILN_INLINE void forward_rows_staged(const NormForwardArgs* a, size_t r0, size_t r1, const int layer, const int dt) {
  float xf[STAGE_MAX] __attribute__((aligned(16)));
  float wf[STAGE_MAX] __attribute__((aligned(16)));
  float bf[STAGE_MAX] __attribute__((aligned(16)));
  const size_t dim = (size_t)a->dim;
  if (r0 >= r1) return;
  widen(wf, a->weight, dim, dt);
  if (a->bias) widen(bf, a->bias, dim, dt);
  for (size_t r = r0; r < r1; r++) {
    float mean, rstd;
    widen(xf, input_row(a, r, dim, dt), dim, dt);
    forward_row(xf, wf, a->bias ? bf : NULL, (char*)a->out + r * dim * 2, dim, a->eps, a->weight_offset, layer, &mean, &rstd, KILN_DT_F32, dt);
    if (layer) a->mean[r] = mean;
    a->rstd[r] = rstd;
  }
}

KILN_INLINE void forward(const NormForwardArgs* a, int thread, int nthreads, const int layer) {
  size_t r0, r1;
  kiln_split((size_t)a->rows, 1, thread, nthreads, &r0, &r1);
  const int staged = a->dim <= STAGE_MAX;
  switch (a->dtype) {
    case KILN_DT_F32: forward_rows(a, r0, r1, layer, KILN_DT_F32); break;
    case KILN_DT_BF16:
      if (staged) forward_rows_staged(a, r0, r1, layer, KILN_DT_BF16);
      else forward_rows(a, r0, r1, layer, KILN_DT_BF16);
      break;
    case KILN_DT_F16:
      if (staged) forward_rows_staged(a, r0, r1, layer, KILN_DT_F16);
      else forward_rows(a, r0, r1, layer, KILN_DT_F16);
      break;
  }
}

KILN_EXPORT(kiln_layer_norm_forward)
void kiln_layer_norm_forward(const NormForwardArgs* a, int thread, int nthreads) { forward(a, thread, nthreads, 1); }

KILN_EXPORT(kiln_rms_norm_forward)
void kiln_rms_norm_forward(const NormForwardArgs* a, int thread, int nthreads) { forward(a, thread, nthreads, 0); }

/* ---- backward ---------------------------------------------------------- */

/*
 * One row: dout, x, w of dtype in_dt, dx and dres (NULL: none) of dtype out_dt; its dWeight
 * (dBias, dX's column sums) terms are added into the thread's partial rows pw (pb, px;
 * NULL: none). Past the end of the row the tail lanes load 0, so they add 0 to every sum.
 */
KILN_INLINE void backward_row(const void* dout, const void* x, const void* w, void* dx, const void* dres, float* pw, float* pb, float* px,
                              size_t dim, float mean, float rstd, float w_offset, const int layer, const int in_dt, const int out_dt) {
  const float inv_dim = 1.0f / (float)dim;
  const v128_t vmean = wasm_f32x4_splat(mean);
  const v128_t vrstd = wasm_f32x4_splat(rstd);
  const v128_t voff = wasm_f32x4_splat(w_offset);
  v128_t sg = wasm_f32x4_splat(0.0f), sgx = sg;
  for (size_t k = 0; k < dim; k += 4) {
    const int n = dim - k >= 4 ? 4 : (int)(dim - k);
    const v128_t d = LOAD(dout, k, n, in_dt);
    const v128_t xhat = wasm_f32x4_mul(wasm_f32x4_sub(LOAD(x, k, n, in_dt), vmean), vrstd);
    const v128_t g = wasm_f32x4_mul(d, wasm_f32x4_add(LOAD(w, k, n, in_dt), voff));
    sg = wasm_f32x4_add(sg, g);
    sgx = KILN_MADD(sgx, g, xhat);
    wasm_v128_store(pw + k, KILN_MADD(wasm_v128_load(pw + k), d, xhat));
    if (pb) wasm_v128_store(pb + k, wasm_f32x4_add(wasm_v128_load(pb + k), d));
  }
  const v128_t gmean = wasm_f32x4_splat(layer ? kiln_hsum(sg) * inv_dim : 0.0f);
  const v128_t gxmean = wasm_f32x4_splat(kiln_hsum(sgx) * inv_dim);
  for (size_t k = 0; k < dim; k += 4) {
    const int n = dim - k >= 4 ? 4 : (int)(dim - k);
    const v128_t xhat = wasm_f32x4_mul(wasm_f32x4_sub(LOAD(x, k, n, in_dt), vmean), vrstd);
    const v128_t g = wasm_f32x4_mul(LOAD(dout, k, n, in_dt), wasm_f32x4_add(LOAD(w, k, n, in_dt), voff));
    v128_t v = wasm_f32x4_mul(vrstd, wasm_f32x4_sub(wasm_f32x4_sub(g, gmean), wasm_f32x4_mul(xhat, gxmean)));
    if (dres) v = wasm_f32x4_add(v, LOAD(dres, k, n, out_dt));
    STORE(dx, k, v, n, out_dt);
    if (px) wasm_v128_store(px + k, wasm_f32x4_add(wasm_v128_load(px + k), LOAD(dx, k, n, out_dt)));
  }
}

KILN_INLINE void backward_rows(const NormBackwardArgs* a, size_t r0, size_t r1, float* pw, float* pb, float* px, const int layer, const int dt) {
  const size_t dim = (size_t)a->dim;
  const size_t esize = dt == KILN_DT_F32 ? 4 : 2;
  for (size_t r = r0; r < r1; r++) {
    const size_t o = r * dim * esize;
    backward_row((const char*)a->dout + o, (const char*)a->x + o, a->weight, (char*)a->dx + o, a->dres ? (const char*)a->dres + o : NULL, pw, pb,
                 px, dim, layer ? a->mean[r] : 0.0f, a->rstd[r], a->weight_offset, layer, dt, dt);
  }
}

/* bf16 / f16 rows of at most STAGE_MAX: weight and each row's dOut and x read as f32 from the stack. */
KILN_INLINE void backward_rows_staged(const NormBackwardArgs* a, size_t r0, size_t r1, float* pw, float* pb, float* px, const int layer,
                                      const int dt) {
  float df[STAGE_MAX] __attribute__((aligned(16)));
  float xf[STAGE_MAX] __attribute__((aligned(16)));
  float wf[STAGE_MAX] __attribute__((aligned(16)));
  const size_t dim = (size_t)a->dim;
  if (r0 >= r1) return;
  widen(wf, a->weight, dim, dt);
  for (size_t r = r0; r < r1; r++) {
    const size_t o = r * dim * 2;
    widen(df, (const char*)a->dout + o, dim, dt);
    widen(xf, (const char*)a->x + o, dim, dt);
    backward_row(df, xf, wf, (char*)a->dx + o, a->dres ? (const char*)a->dres + o : NULL, pw, pb, px, dim, layer ? a->mean[r] : 0.0f, a->rstd[r],
                 a->weight_offset, layer, KILN_DT_F32, dt);
  }
}

KILN_INLINE void backward(const NormBackwardArgs* a, int thread, int nthreads, const int layer) {
  const size_t dim4 = ((size_t)a->dim + 3) & ~(size_t)3;
  float* pw = a->scratch + (size_t)thread * a->scratch_stride;
  float* pb = layer && a->dbias ? pw + dim4 : NULL;
  float* px = a->dxsums ? pw + 2 * dim4 : NULL;
  for (size_t k = 0; k < dim4; k += 4) {
    wasm_v128_store(pw + k, wasm_f32x4_splat(0.0f));
    if (pb) wasm_v128_store(pb + k, wasm_f32x4_splat(0.0f));
    if (px) wasm_v128_store(px + k, wasm_f32x4_splat(0.0f));
  }
  size_t r0, r1;
  kiln_split((size_t)a->rows, 1, thread, nthreads, &r0, &r1);
  const int staged = a->dim <= STAGE_MAX;
  switch (a->dtype) {
    case KILN_DT_F32: backward_rows(a, r0, r1, pw, pb, px, layer, KILN_DT_F32); break;
    case KILN_DT_BF16:
      if (staged) backward_rows_staged(a, r0, r1, pw, pb, px, layer, KILN_DT_BF16);
      else backward_rows(a, r0, r1, pw, pb, px, layer, KILN_DT_BF16);
      break;
    case KILN_DT_F16:
      if (staged) backward_rows_staged(a, r0, r1, pw, pb, px, layer, KILN_DT_F16);
      else backward_rows(a, r0, r1, pw, pb, px, layer, KILN_DT_F16);
      break;
  }
}

KILN_EXPORT(kiln_layer_norm_backward)
void kiln_layer_norm_backward(const NormBackwardArgs* a, int thread, int nthreads) { backward(a, thread, nthreads, 1); }

KILN_EXPORT(kiln_rms_norm_backward)
void kiln_rms_norm_backward(const NormBackwardArgs* a, int thread, int nthreads) { backward(a, thread, nthreads, 0); }

/* dst[k] += sum over partials p (in order) of partial_p[offset + k], for columns [c0, c1). */
KILN_INLINE void reduce_columns(const NormBackwardArgs* a, void* dst, size_t offset, size_t c0, size_t c1, const int dt) {
  const float* base = a->scratch + offset;
  for (size_t k = c0; k < c1; k += 4) {
    const int n = c1 - k >= 4 ? 4 : (int)(c1 - k);
    v128_t sum = wasm_v128_load(base + k);
    for (int p = 1; p < a->partials; p++) sum = wasm_f32x4_add(sum, wasm_v128_load(base + (size_t)p * a->scratch_stride + k));
    STORE(dst, k, wasm_f32x4_add(LOAD(dst, k, n, dt), sum), n, dt);
  }
}

KILN_INLINE void reduce(const NormBackwardArgs* a, size_t c0, size_t c1, const int dt) {
  const size_t dim4 = ((size_t)a->dim + 3) & ~(size_t)3;
  reduce_columns(a, a->dweight, 0, c0, c1, dt);
  if (a->dbias) reduce_columns(a, a->dbias, dim4, c0, c1, dt);
  if (a->dxsums) reduce_columns(a, a->dxsums, 2 * dim4, c0, c1, dt);
}

KILN_EXPORT(kiln_norm_param_grad_reduce)
void kiln_norm_param_grad_reduce(const NormBackwardArgs* a, int thread, int nthreads) {
  size_t c0, c1;
  kiln_split((size_t)a->dim, 4, thread, nthreads, &c0, &c1);
  /* Only the parameter gradients are touched here: their dtype alone matters. */
  switch (a->grad_dtype) {
    case KILN_DT_F32: reduce(a, c0, c1, KILN_DT_F32); break;
    case KILN_DT_BF16: reduce(a, c0, c1, KILN_DT_BF16); break;
    case KILN_DT_F16: reduce(a, c0, c1, KILN_DT_F16); break;
  }
}
