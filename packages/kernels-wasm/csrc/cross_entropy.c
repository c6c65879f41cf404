/*
 * cross_entropy: fused softmax + cross-entropy over rows, and row softmax.
 *
 *   forward   lse[r]    = log sum_j exp(logits[r,j])
 *             losses[r] = lse[r] - logits[r, targets[r]]   (0 when targets[r] < 0)
 *   backward  dlogits[r,j] = scale * (exp(logits[r,j] - lse[r]) - [j == targets[r]])
 *             (a zero row when targets[r] < 0); dlogits may be logits itself
 *   forward_backward  both, a row at a time (the row's second read from the cache)
 *   softmax   out[r,j] = exp(x[r,j] * scale - m) / sum_j exp(x[r,j] * scale - m),
 *             m = max_j x[r,j] * scale, scale = 1 / temperature; out may be x itself
 *
 * Layout: logits / x / dlogits / out are (rows, vocab) row-major in the
 * storage dtype; targets i32, losses and lse f32, one per row.
 *
 * A row is read in three passes (max, sum of exponentials, write), each a
 * SIMD sweep, so rows of any length (vocab 50257) stream through the cache.
 * The sum of exponentials accumulates in f32 lanes over blocks of 2048
 * elements and in f64 across blocks; lse is m + log(sum) in f64.
 * Threads take contiguous blocks of rows.
 */
#include "kiln_math.h"
#include "kiln_storage.h"

typedef struct {
  const void* logits;      /* x for softmax */
  const int32_t* targets;  /* cross-entropy only */
  float* losses;           /* forward only */
  float* lse;              /* written by forward, read by backward */
  void* dlogits;           /* backward: dlogits; softmax: out */
  int32_t rows;
  int32_t vocab;
  int32_t dtype;
  float scale;             /* backward: lossScale; softmax: 1 / temperature */
} CrossEntropyArgs;

#define SUM_BLOCK 2048

/* max_j x[j] over one row. */
KILN_INLINE float row_max(const void* x, size_t n, int dt) {
  const v128_t lowest = wasm_f32x4_splat(-__builtin_inff());
  v128_t m0 = lowest, m1 = lowest, m2 = lowest, m3 = lowest;
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    v128_t a, b, c, d;
    kiln_load8(x, j, dt, &a, &b);
    kiln_load8(x, j + 8, dt, &c, &d);
    m0 = wasm_f32x4_pmax(m0, a);
    m1 = wasm_f32x4_pmax(m1, b);
    m2 = wasm_f32x4_pmax(m2, c);
    m3 = wasm_f32x4_pmax(m3, d);
  }
  for (; j + 4 <= n; j += 4) m0 = wasm_f32x4_pmax(m0, kiln_load4(x, j, dt));
  if (j < n) m1 = wasm_f32x4_pmax(m1, kiln_load_partial(x, j, n - j, dt, -__builtin_inff()));
  return kiln_hmax(wasm_f32x4_pmax(wasm_f32x4_pmax(m0, m1), wasm_f32x4_pmax(m2, m3)));
}

/* sum_j exp(x[j] * scale - shift) over one row, in f64 across blocks. */
KILN_INLINE double row_sum_exp(const void* x, size_t n, float scale, float shift, int dt) {
  const v128_t s = wasm_f32x4_splat(scale);
  const v128_t neg = wasm_f32x4_splat(-shift);
  double total = 0;
  for (size_t b = 0; b < n; b += SUM_BLOCK) {
    const size_t end = b + SUM_BLOCK < n ? b + SUM_BLOCK : n;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    size_t j = b;
    for (; j + 16 <= end; j += 16) {
      v128_t a, c, d, e;
      kiln_load8(x, j, dt, &a, &c);
      kiln_load8(x, j + 8, dt, &d, &e);
      s0 = wasm_f32x4_add(s0, kiln_exp_f32x4(KILN_MADD(neg, a, s)));
      s1 = wasm_f32x4_add(s1, kiln_exp_f32x4(KILN_MADD(neg, c, s)));
      s2 = wasm_f32x4_add(s2, kiln_exp_f32x4(KILN_MADD(neg, d, s)));
      s3 = wasm_f32x4_add(s3, kiln_exp_f32x4(KILN_MADD(neg, e, s)));
    }
    for (; j + 4 <= end; j += 4) s0 = wasm_f32x4_add(s0, kiln_exp_f32x4(KILN_MADD(neg, kiln_load4(x, j, dt), s)));
    if (j < end) {
      /* Only the lanes that hold elements count. */
      const size_t count = end - j;
      const v128_t e = kiln_exp_f32x4(KILN_MADD(neg, kiln_load_partial(x, j, count, dt, 0.0f), s));
      const v128_t lane = wasm_i32x4_make(0, 1, 2, 3);
      s1 = wasm_f32x4_add(s1, wasm_v128_and(e, wasm_i32x4_lt(lane, wasm_i32x4_splat((int32_t)count))));
    }
    total += (double)kiln_hsum(wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3)));
  }
  return total;
}

/* out[j] = mul * (exp(x[j] * scale - shift)) over one row; out may be x. */
KILN_INLINE void row_write_exp(const void* x, void* out, size_t n, float scale, float shift, float mul, int dt) {
  const v128_t s = wasm_f32x4_splat(scale);
  const v128_t neg = wasm_f32x4_splat(-shift);
  const v128_t k = wasm_f32x4_splat(mul);
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    v128_t a, b, c, d;
    kiln_load8(x, j, dt, &a, &b);
    kiln_load8(x, j + 8, dt, &c, &d);
    a = wasm_f32x4_mul(k, kiln_exp_f32x4(KILN_MADD(neg, a, s)));
    b = wasm_f32x4_mul(k, kiln_exp_f32x4(KILN_MADD(neg, b, s)));
    c = wasm_f32x4_mul(k, kiln_exp_f32x4(KILN_MADD(neg, c, s)));
    d = wasm_f32x4_mul(k, kiln_exp_f32x4(KILN_MADD(neg, d, s)));
    kiln_store8(out, j, a, b, dt);
    kiln_store8(out, j + 8, c, d, dt);
  }
  for (; j + 4 <= n; j += 4) {
    kiln_store4(out, j, wasm_f32x4_mul(k, kiln_exp_f32x4(KILN_MADD(neg, kiln_load4(x, j, dt), s))), dt);
  }
  if (j < n) {
    const v128_t v = kiln_load_partial(x, j, n - j, dt, 0.0f);
    kiln_store_partial(out, j, wasm_f32x4_mul(k, kiln_exp_f32x4(KILN_MADD(neg, v, s))), n - j, dt);
  }
}

KILN_INLINE void row_zero(void* out, size_t n, int dt) {
  const v128_t z = wasm_f32x4_splat(0);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) kiln_store8(out, j, z, z, dt);
  for (; j < n; j++) kiln_store1(out, j, 0.0f, dt);
}

KILN_INLINE size_t row_bytes(const CrossEntropyArgs* g) {
  return (size_t)g->vocab * (g->dtype == KILN_DT_F32 ? 4 : 2);
}

KILN_INLINE void forward_row(const CrossEntropyArgs* g, size_t r, int dt) {
  const size_t n = (size_t)g->vocab;
  const char* x = (const char*)g->logits + r * row_bytes(g);
  const float m = row_max(x, n, dt);
  const double lse = (double)m + kiln_log(row_sum_exp(x, n, 1.0f, m, dt));
  const int32_t t = g->targets[r];
  g->lse[r] = (float)lse;
  /* The host rejects targets >= vocab; never read past the row if one slips through. */
  g->losses[r] = t < 0 ? 0.0f : t < g->vocab ? (float)(lse - (double)kiln_load1(x, (size_t)t, dt)) : __builtin_nanf("");
}

KILN_INLINE void backward_row(const CrossEntropyArgs* g, size_t r, int dt) {
  const size_t n = (size_t)g->vocab;
  const size_t stride = row_bytes(g);
  const char* x = (const char*)g->logits + r * stride;
  char* dx = (char*)g->dlogits + r * stride;
  const int32_t t = g->targets[r];
  if (t < 0 || t >= g->vocab) {
    row_zero(dx, n, dt);
    return;
  }
  const float lse = g->lse[r];
  /* Read the target's logit before the row is overwritten (dlogits may be logits). */
  const float xt = kiln_load1(x, (size_t)t, dt);
  row_write_exp(x, dx, n, 1.0f, lse, g->scale, dt);
  const float pt = wasm_f32x4_extract_lane(kiln_exp_f32x4(wasm_f32x4_splat(xt - lse)), 0);
  kiln_store1(dx, (size_t)t, g->scale * (pt - 1.0f), dt);
}

KILN_INLINE void forward_rows(const CrossEntropyArgs* g, size_t r0, size_t r1, int dt) {
  for (size_t r = r0; r < r1; r++) forward_row(g, r, dt);
}

KILN_INLINE void backward_rows(const CrossEntropyArgs* g, size_t r0, size_t r1, int dt) {
  for (size_t r = r0; r < r1; r++) backward_row(g, r, dt);
}

/* Forward then backward row by row: the row is still in the cache for its second read. */
KILN_INLINE void forward_backward_rows(const CrossEntropyArgs* g, size_t r0, size_t r1, int dt) {
  for (size_t r = r0; r < r1; r++) {
    forward_row(g, r, dt);
    backward_row(g, r, dt);
  }
}

KILN_INLINE void softmax_rows(const CrossEntropyArgs* g, size_t r0, size_t r1, int dt) {
  const size_t n = (size_t)g->vocab;
  const size_t stride = row_bytes(g);
  const float scale = g->scale;
  for (size_t r = r0; r < r1; r++) {
    const char* x = (const char*)g->logits + r * stride;
    /* scale > 0, so max(x * scale) = max(x) * scale, rounding included. */
    const float m = row_max(x, n, dt) * scale;
    const double sum = row_sum_exp(x, n, scale, m, dt);
    row_write_exp(x, (char*)g->dlogits + r * stride, n, scale, m, (float)(1.0 / sum), dt);
  }
}

/* Rows [*r0, *r1) of this thread. */
KILN_INLINE void thread_rows(const CrossEntropyArgs* g, int thread, int nthreads, size_t* r0, size_t* r1) {
  kiln_split((size_t)g->rows, 1, thread, nthreads, r0, r1);
}

#define DISPATCH_DTYPE(fn, g, r0, r1)                    \
  switch ((g)->dtype) {                                  \
    case KILN_DT_F32: fn(g, r0, r1, KILN_DT_F32); break; \
    case KILN_DT_BF16: fn(g, r0, r1, KILN_DT_BF16); break; \
    default: fn(g, r0, r1, KILN_DT_F16); break;          \
  }

KILN_EXPORT(kiln_cross_entropy_forward)
void kiln_cross_entropy_forward(const CrossEntropyArgs* g, int thread, int nthreads) {
  size_t r0, r1;
  thread_rows(g, thread, nthreads, &r0, &r1);
  DISPATCH_DTYPE(forward_rows, g, r0, r1)
}

KILN_EXPORT(kiln_cross_entropy_forward_backward)
void kiln_cross_entropy_forward_backward(const CrossEntropyArgs* g, int thread, int nthreads) {
  size_t r0, r1;
  thread_rows(g, thread, nthreads, &r0, &r1);
  DISPATCH_DTYPE(forward_backward_rows, g, r0, r1)
}

KILN_EXPORT(kiln_cross_entropy_backward)
void kiln_cross_entropy_backward(const CrossEntropyArgs* g, int thread, int nthreads) {
  size_t r0, r1;
  thread_rows(g, thread, nthreads, &r0, &r1);
  DISPATCH_DTYPE(backward_rows, g, r0, r1)
}

KILN_EXPORT(kiln_softmax_forward)
void kiln_softmax_forward(const CrossEntropyArgs* g, int thread, int nthreads) {
  size_t r0, r1;
  thread_rows(g, thread, nthreads, &r0, &r1);
  DISPATCH_DTYPE(softmax_rows, g, r0, r1)
}
