/*
 * Mixture-of-experts token movement between token order and slot order.
 *
 * T tokens, top k, rows of `dim` elements in the storage dtype; slots (T, k) i32,
 * a permutation of [0, T*k) (the host checks the range); scale (T, k) optional.
 *
 *   dispatch:    out[slots[t, j], :] = scale[t, j] * x[t, :]             x (T, dim) -> out (T*k, dim)
 *   combine:     out[t, :] = (accumulate ? out[t, :] : 0) + sum_j scale[t, j] * x[slots[t, j], :]
 *                                                                         x (T*k, dim) -> out (T, dim)
 *   scale grad:  dScale[t, j] = sum_d dOut[t, d] * x[slots[t, j], d]      -> dScale (T, k)
 *
 * Products and sums in f32, rounded once to the dtype. combine sums in j order,
 * each product rounded before it is added (no fused multiply-add, so the plain
 * and relaxed builds agree). scale grad sums four lanes, then across lanes.
 * Threads take contiguous ranges of assignments (dispatch, scale grad) or of
 * tokens (combine); every output element has one writer.
 */
#include "kiln_storage.h"

/* Host-written argument block; mirrored in src/backend-moe-move.ts. */
typedef struct {
  int32_t tokens, top_k, dim, dtype;
  const void* x;
  const int32_t* slots;
  const void* scale;      /* NULL: 1 */
  void* out;              /* dispatch, combine: out;  scale grad: dScale */
  const void* d_out;      /* scale grad only */
  int32_t accumulate;     /* combine only */
} MoveArgs;

/* Columns per register block of combine: four f32x4 accumulators. */
#define COMBINE_COLS 16

static void copy_bytes(char* dst, const char* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) wasm_v128_store(dst + i, wasm_v128_load(src + i));
  for (; i < n; i++) dst[i] = src[i];
}

/* dst row = s * src row, `dim` elements of dtype dt. */
KILN_INLINE void scaled_row(void* dst, const void* src, size_t dim, float s, const int dt) {
  const v128_t sv = wasm_f32x4_splat(s);
  size_t d = 0;
  for (; d + 8 <= dim; d += 8) {
    v128_t lo, hi;
    kiln_load8(src, d, dt, &lo, &hi);
    kiln_store8(dst, d, wasm_f32x4_mul(lo, sv), wasm_f32x4_mul(hi, sv), dt);
  }
  for (; d + 4 <= dim; d += 4) kiln_store4(dst, d, wasm_f32x4_mul(kiln_load4(src, d, dt), sv), dt);
  if (d < dim) kiln_store_partial(dst, d, wasm_f32x4_mul(kiln_load_partial(src, d, dim - d, dt, 0.0f), sv), dim - d, dt);
}

KILN_INLINE void dispatch_range(const MoveArgs* a, size_t i0, size_t i1, const int dt) {
  const size_t dim = (size_t)a->dim, k = (size_t)a->top_k;
  const size_t es = dt == KILN_DT_F32 ? 4 : 2;
  for (size_t i = i0; i < i1; i++) {
    const char* src = (const char*)a->x + (i / k) * dim * es;
    char* dst = (char*)a->out + (size_t)a->slots[i] * dim * es;
    if (a->scale) scaled_row(dst, src, dim, kiln_load1(a->scale, i, dt), dt);
    else copy_bytes(dst, src, dim * es);
  }
}

KILN_EXPORT(kiln_moe_dispatch)
void kiln_moe_dispatch(const MoveArgs* a, int thread, int nthreads) {
  size_t i0, i1;
  kiln_split((size_t)a->tokens * a->top_k, 1, thread, nthreads, &i0, &i1);
  switch (a->dtype) {
    case KILN_DT_F32: dispatch_range(a, i0, i1, KILN_DT_F32); break;
    case KILN_DT_BF16: dispatch_range(a, i0, i1, KILN_DT_BF16); break;
    case KILN_DT_F16: dispatch_range(a, i0, i1, KILN_DT_F16); break;
  }
}

/*
 * Columns [d, d + 4*nv) of token t's output, nv f32x4 accumulators (nv constant
 * after inlining); `count` < 4 only for a final partial vector (nv == 1).
 */
KILN_INLINE void combine_block(const MoveArgs* a, size_t t, size_t d, int nv, size_t count, const int dt) {
  const size_t dim = (size_t)a->dim, k = (size_t)a->top_k;
  const size_t at = t * dim + d;
  v128_t acc[4];
  for (int v = 0; v < nv; v++) {
    if (!a->accumulate) acc[v] = wasm_f32x4_splat(0.0f);
    else acc[v] = count < 4 ? kiln_load_partial(a->out, at, count, dt, 0.0f) : kiln_load4(a->out, at + 4 * v, dt);
  }
  for (size_t j = 0; j < k; j++) {
    const size_t src = (size_t)a->slots[t * k + j] * dim + d;
    const v128_t s = wasm_f32x4_splat(a->scale ? kiln_load1(a->scale, t * k + j, dt) : 1.0f);
    for (int v = 0; v < nv; v++) {
      v128_t x = count < 4 ? kiln_load_partial(a->x, src, count, dt, 0.0f) : kiln_load4(a->x, src + 4 * v, dt);
      if (a->scale) x = wasm_f32x4_mul(x, s);
      acc[v] = wasm_f32x4_add(acc[v], x);
    }
  }
  for (int v = 0; v < nv; v++) {
    if (count < 4) kiln_store_partial(a->out, at, acc[v], count, dt);
    else kiln_store4(a->out, at + 4 * v, acc[v], dt);
  }
}

KILN_INLINE void combine_range(const MoveArgs* a, size_t t0, size_t t1, const int dt) {
  const size_t dim = (size_t)a->dim;
  for (size_t t = t0; t < t1; t++) {
    size_t d = 0;
    for (; d + COMBINE_COLS <= dim; d += COMBINE_COLS) combine_block(a, t, d, COMBINE_COLS / 4, 4, dt);
    for (; d + 4 <= dim; d += 4) combine_block(a, t, d, 1, 4, dt);
    if (d < dim) combine_block(a, t, d, 1, dim - d, dt);
  }
}

KILN_EXPORT(kiln_moe_combine)
void kiln_moe_combine(const MoveArgs* a, int thread, int nthreads) {
  size_t t0, t1;
  kiln_split((size_t)a->tokens, 1, thread, nthreads, &t0, &t1);
  switch (a->dtype) {
    case KILN_DT_F32: combine_range(a, t0, t1, KILN_DT_F32); break;
    case KILN_DT_BF16: combine_range(a, t0, t1, KILN_DT_BF16); break;
    case KILN_DT_F16: combine_range(a, t0, t1, KILN_DT_F16); break;
  }
}

/* sum_d p[d] * q[d] over `dim` elements, in four lanes of two accumulators, then across lanes. */
KILN_INLINE float dot_row(const void* p, size_t pi, const void* q, size_t qi, size_t dim, const int dt) {
  v128_t s0 = wasm_f32x4_splat(0.0f), s1 = s0;
  size_t d = 0;
  for (; d + 8 <= dim; d += 8) {
    v128_t p0, p1, q0, q1;
    kiln_load8(p, pi + d, dt, &p0, &p1);
    kiln_load8(q, qi + d, dt, &q0, &q1);
    s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(p0, q0));
    s1 = wasm_f32x4_add(s1, wasm_f32x4_mul(p1, q1));
  }
  for (; d + 4 <= dim; d += 4) s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(kiln_load4(p, pi + d, dt), kiln_load4(q, qi + d, dt)));
  if (d < dim) {
    const size_t n = dim - d;
    s1 = wasm_f32x4_add(s1, wasm_f32x4_mul(kiln_load_partial(p, pi + d, n, dt, 0.0f), kiln_load_partial(q, qi + d, n, dt, 0.0f)));
  }
  return kiln_hsum(wasm_f32x4_add(s0, s1));
}

KILN_INLINE void scale_grad_range(const MoveArgs* a, size_t i0, size_t i1, const int dt) {
  const size_t dim = (size_t)a->dim, k = (size_t)a->top_k;
  for (size_t i = i0; i < i1; i++) {
    kiln_store1(a->out, i, dot_row(a->d_out, (i / k) * dim, a->x, (size_t)a->slots[i] * dim, dim, dt), dt);
  }
}

KILN_EXPORT(kiln_moe_combine_scale_grad)
void kiln_moe_combine_scale_grad(const MoveArgs* a, int thread, int nthreads) {
  size_t i0, i1;
  kiln_split((size_t)a->tokens * a->top_k, 1, thread, nthreads, &i0, &i1);
  switch (a->dtype) {
    case KILN_DT_F32: scale_grad_range(a, i0, i1, KILN_DT_F32); break;
    case KILN_DT_BF16: scale_grad_range(a, i0, i1, KILN_DT_BF16); break;
    case KILN_DT_F16: scale_grad_range(a, i0, i1, KILN_DT_F16); break;
  }
}
