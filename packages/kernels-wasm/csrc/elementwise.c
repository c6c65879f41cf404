/*
 * elementwise: residual add and scale over flat arrays.
 *
 *   add    out[i] = a[i] + b[i]       out may be a or b
 *   scale  out[i] = alpha * x[i]      out may be x
 *
 * a, b, x and out hold n elements of the storage dtype, contiguous; the
 * arithmetic is f32. Every element is read before it is written, so exact
 * in-place calls work. Threads take contiguous chunks of whole 64-byte lines.
 */
#include "kiln_storage.h"

typedef struct {
  const void* a;   /* scale: x */
  const void* b;   /* scale: unused */
  void* out;
  int32_t n;
  int32_t dtype;
  float alpha;     /* scale only */
} ElementwiseArgs;

#define CHUNK_ALIGN 32

KILN_INLINE void add_range(const ElementwiseArgs* g, size_t lo, size_t hi, int dt) {
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    v128_t a0, a1, a2, a3, b0, b1, b2, b3;
    kiln_load8(g->a, i, dt, &a0, &a1);
    kiln_load8(g->a, i + 8, dt, &a2, &a3);
    kiln_load8(g->b, i, dt, &b0, &b1);
    kiln_load8(g->b, i + 8, dt, &b2, &b3);
    kiln_store8(g->out, i, wasm_f32x4_add(a0, b0), wasm_f32x4_add(a1, b1), dt);
    kiln_store8(g->out, i + 8, wasm_f32x4_add(a2, b2), wasm_f32x4_add(a3, b3), dt);
  }
  for (; i + 4 <= hi; i += 4) kiln_store4(g->out, i, wasm_f32x4_add(kiln_load4(g->a, i, dt), kiln_load4(g->b, i, dt)), dt);
  if (i < hi) {
    const v128_t s = wasm_f32x4_add(kiln_load_partial(g->a, i, hi - i, dt, 0.0f), kiln_load_partial(g->b, i, hi - i, dt, 0.0f));
    kiln_store_partial(g->out, i, s, hi - i, dt);
  }
}

KILN_INLINE void scale_range(const ElementwiseArgs* g, size_t lo, size_t hi, int dt) {
  const v128_t alpha = wasm_f32x4_splat(g->alpha);
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    v128_t x0, x1, x2, x3;
    kiln_load8(g->a, i, dt, &x0, &x1);
    kiln_load8(g->a, i + 8, dt, &x2, &x3);
    kiln_store8(g->out, i, wasm_f32x4_mul(alpha, x0), wasm_f32x4_mul(alpha, x1), dt);
    kiln_store8(g->out, i + 8, wasm_f32x4_mul(alpha, x2), wasm_f32x4_mul(alpha, x3), dt);
  }
  for (; i + 4 <= hi; i += 4) kiln_store4(g->out, i, wasm_f32x4_mul(alpha, kiln_load4(g->a, i, dt)), dt);
  if (i < hi) kiln_store_partial(g->out, i, wasm_f32x4_mul(alpha, kiln_load_partial(g->a, i, hi - i, dt, 0.0f)), hi - i, dt);
}

#define DISPATCH_DTYPE(fn, g, lo, hi)                    \
  switch ((g)->dtype) {                                  \
    case KILN_DT_F32: fn(g, lo, hi, KILN_DT_F32); break; \
    case KILN_DT_BF16: fn(g, lo, hi, KILN_DT_BF16); break; \
    default: fn(g, lo, hi, KILN_DT_F16); break;          \
  }

KILN_EXPORT(kiln_add)
void kiln_add(const ElementwiseArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  DISPATCH_DTYPE(add_range, g, lo, hi)
}

KILN_EXPORT(kiln_scale)
void kiln_scale(const ElementwiseArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  DISPATCH_DTYPE(scale_range, g, lo, hi)
}

/*
 * dropout (the contract's): out[i] = keep(i) ? x[i] * scale : 0, keep(i) when
 * (mix(i ^ mix(seed)) >> 8) >= threshold, mix the 32-bit hash below. Four
 * elements at a time, their hashes in i32x4 lanes (u32 arithmetic wraps alike).
 */
typedef struct {
  const void* x;
  void* out;
  int32_t n;
  int32_t dtype;
  uint32_t seed;
  uint32_t threshold; /* ceil(p * 2^24) */
  float scale;        /* 1 / (1 - p) in f32 */
} DropoutArgs;

static uint32_t dropout_mix(uint32_t z) {
  z ^= z >> 16;
  z *= 0x7feb352du;
  z ^= z >> 15;
  z *= 0x846ca68bu;
  return z ^ (z >> 16);
}

KILN_INLINE v128_t dropout_mix4(v128_t z) {
  z = wasm_v128_xor(z, wasm_u32x4_shr(z, 16));
  z = wasm_i32x4_mul(z, wasm_i32x4_splat((int32_t)0x7feb352d));
  z = wasm_v128_xor(z, wasm_u32x4_shr(z, 15));
  z = wasm_i32x4_mul(z, wasm_i32x4_splat((int32_t)0x846ca68b));
  return wasm_v128_xor(z, wasm_u32x4_shr(z, 16));
}

KILN_INLINE void dropout_range(const DropoutArgs* g, size_t lo, size_t hi, int dt) {
  const v128_t key = wasm_i32x4_splat((int32_t)dropout_mix(g->seed));
  const v128_t threshold = wasm_i32x4_splat((int32_t)g->threshold);
  const v128_t scale = wasm_f32x4_splat(g->scale);
  const v128_t lanes = wasm_i32x4_make(0, 1, 2, 3);
  for (size_t i = lo; i < hi; i += 4) {
    const v128_t index = wasm_i32x4_add(wasm_i32x4_splat((int32_t)i), lanes);
    /* 24-bit values: a signed compare is an unsigned one */
    const v128_t keep = wasm_i32x4_ge(wasm_u32x4_shr(dropout_mix4(wasm_v128_xor(index, key)), 8), threshold);
    const size_t count = hi - i < 4 ? hi - i : 4;
    const v128_t x = count == 4 ? kiln_load4(g->x, i, dt) : kiln_load_partial(g->x, i, count, dt, 0.0f);
    const v128_t y = wasm_v128_and(wasm_f32x4_mul(x, scale), keep);
    if (count == 4) kiln_store4(g->out, i, y, dt);
    else kiln_store_partial(g->out, i, y, count, dt);
  }
}

KILN_EXPORT(kiln_dropout)
void kiln_dropout(const DropoutArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  DISPATCH_DTYPE(dropout_range, g, lo, hi)
}
