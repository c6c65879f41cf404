/*
 * Matrix-vector products: the matmuls whose output is one row (m == 1) or
 * one column (n == 1). Packing buys nothing there (every element of the
 * matrix is used once), so these stream the matrix straight from memory.
 *
 *   rows_dot_vector:   out[i] = sum_p X[i, p] * v[p]     X row-major, ldx >= k
 *   vector_times_rows: out[j] = sum_p v[p] * X[p, j]     X row-major, ldx >= width
 *
 * then out = alpha * sum (+ out if accumulate) (+ bias), rounded once into
 * out's dtype. X, v and bias share one dtype dt (f32, bf16 or f16); out is in
 * ct, dt or f32 (an f32 out of 16-bit inputs is not rounded); sums are f32.
 */
#include "matmul_vector.h"
#include "matmul_dtype.h"

#define SPLAT_LANE(x, l) wasm_i32x4_shuffle((x), (x), (l), (l), (l), (l))

KILN_INLINE float horizontal_sum(v128_t x) {
  return wasm_f32x4_extract_lane(x, 0) + wasm_f32x4_extract_lane(x, 1) + wasm_f32x4_extract_lane(x, 2) +
         wasm_f32x4_extract_lane(x, 3);
}

KILN_INLINE void store_output(const MatvecOut* o, size_t i, float sum, int dt, int ct) {
  float y = o->alpha * sum;
  if (o->accumulate) y += kiln_load1(o->out, i, ct);
  if (o->bias) y += kiln_load1(o->bias, i * (size_t)o->bias_step, dt);
  kiln_store1(o->out, i, y, ct);
}

/* ---- rows of X dotted with v ------------------------------------------- */

/* One row of X (elements row..row+k-1, dtype dt) dotted with an f32 v, four independent accumulators over p. */
KILN_INLINE float row_dot(const void* x, size_t row, const float* v, int k, int dt) {
  v128_t acc0 = wasm_f32x4_splat(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int p = 0;
  for (; p + 16 <= k; p += 16) {
    v128_t x0, x1, x2, x3;
    kiln_load8(x, row + p, dt, &x0, &x1);
    kiln_load8(x, row + p + 8, dt, &x2, &x3);
    acc0 = KILN_MADD(acc0, x0, wasm_v128_load(v + p));
    acc1 = KILN_MADD(acc1, x1, wasm_v128_load(v + p + 4));
    acc2 = KILN_MADD(acc2, x2, wasm_v128_load(v + p + 8));
    acc3 = KILN_MADD(acc3, x3, wasm_v128_load(v + p + 12));
  }
  for (; p + 4 <= k; p += 4) acc0 = KILN_MADD(acc0, kiln_load4(x, row + p, dt), wasm_v128_load(v + p));
  float sum = horizontal_sum(wasm_f32x4_add(wasm_f32x4_add(acc0, acc1), wasm_f32x4_add(acc2, acc3)));
  for (; p < k; p++) sum += kiln_load1(x, row + p, dt) * v[p];
  return sum;
}

KILN_INLINE void rows_dot_vector(const void* x, int ldx, const void* v, int k, const MatvecOut* out, int i0, int i1,
                                 float* work, int dt, int ct) {
  const float* vf = (const float*)v;
  if (dt != KILN_DT_F32) { /* v once in f32, not once per row */
    int p = 0;
    for (; p + 4 <= k; p += 4) wasm_v128_store(work + p, kiln_load4(v, p, dt));
    for (; p < k; p++) work[p] = kiln_load1(v, p, dt);
    vf = work;
  }
  for (int i = i0; i < i1; i++) store_output(out, i, row_dot(x, (size_t)i * ldx, vf, k, dt), dt, ct);
}

/* One instance per pair (dt, ct): the dtypes are constants inside each. */
void kiln_rows_dot_vector(const void* x, int ldx, const void* v, int k, const MatvecOut* out, int i0, int i1,
                          float* work, int dt, int ct) {
  MM_CALL_WITH_DTYPES(dt, ct, rows_dot_vector, x, ldx, v, k, out, i0, i1, work);
}

/* ---- v weighting the rows of X ----------------------------------------- */

/*
 * Columns are taken COLS at a time with their f32 sums in `work` (in L1);
 * for each group of four rows of X every sum is loaded once, gets four
 * multiply-adds and is stored, so the matrix streams through four contiguous
 * rows at a time.
 */
#define COLS 2048

/* work[0..w) += sum over `rows` (1..4) rows at X[at], X[at + ldx], ... of splat(vq) * row. */
KILN_INLINE void add_rows(const void* x, size_t at, int ldx, v128_t s0, v128_t s1, v128_t s2, v128_t s3, int rows,
                          int w, float* work, int dt) {
  const size_t r0 = at, r1 = at + ldx, r2 = at + 2 * (size_t)ldx, r3 = at + 3 * (size_t)ldx;
  const int w4 = w & ~3;
  int j = 0;
  if (rows == 4) {
    for (; j < w4; j += 4) {
      v128_t acc = wasm_v128_load(work + j);
      acc = KILN_MADD(acc, s0, kiln_load4(x, r0 + j, dt));
      acc = KILN_MADD(acc, s1, kiln_load4(x, r1 + j, dt));
      acc = KILN_MADD(acc, s2, kiln_load4(x, r2 + j, dt));
      acc = KILN_MADD(acc, s3, kiln_load4(x, r3 + j, dt));
      wasm_v128_store(work + j, acc);
    }
  } else {
    for (; j < w4; j += 4) {
      v128_t acc = wasm_v128_load(work + j);
      acc = KILN_MADD(acc, s0, kiln_load4(x, r0 + j, dt));
      if (rows > 1) acc = KILN_MADD(acc, s1, kiln_load4(x, r1 + j, dt));
      if (rows > 2) acc = KILN_MADD(acc, s2, kiln_load4(x, r2 + j, dt));
      wasm_v128_store(work + j, acc);
    }
  }
  if (j < w) {
    const int n = w - j;
    v128_t acc = wasm_v128_load(work + j);
    acc = KILN_MADD(acc, s0, mm_load_n(x, r0 + j, n, dt));
    if (rows > 1) acc = KILN_MADD(acc, s1, mm_load_n(x, r1 + j, n, dt));
    if (rows > 2) acc = KILN_MADD(acc, s2, mm_load_n(x, r2 + j, n, dt));
    if (rows > 3) acc = KILN_MADD(acc, s3, mm_load_n(x, r3 + j, n, dt));
    wasm_v128_store(work + j, acc);
  }
}

KILN_INLINE void vector_times_rows(const void* x, int ldx, const void* v, int k, const MatvecOut* out, int j0, int j1,
                                   float* work, int dt, int ct) {
  const v128_t alpha = wasm_f32x4_splat(out->alpha);
  const v128_t zero = wasm_f32x4_splat(0.0f);
  for (int jb = j0; jb < j1; jb += COLS) {
    const int w = kiln_min(COLS, j1 - jb);
    for (int j = 0; j < w; j += 4) wasm_v128_store(work + j, zero);
    int p = 0;
    for (; p + 4 <= k; p += 4) {
      const v128_t vp = kiln_load4(v, p, dt);
      add_rows(x, (size_t)p * ldx + jb, ldx, SPLAT_LANE(vp, 0), SPLAT_LANE(vp, 1), SPLAT_LANE(vp, 2),
               SPLAT_LANE(vp, 3), 4, w, work, dt);
    }
    if (p < k) {
      const int rows = k - p;
      const v128_t vp = mm_load_n(v, p, rows, dt);
      add_rows(x, (size_t)p * ldx + jb, ldx, SPLAT_LANE(vp, 0), SPLAT_LANE(vp, 1), SPLAT_LANE(vp, 2),
               SPLAT_LANE(vp, 3), rows, w, work, dt);
    }
    /* out = alpha * sum (+ out) (+ bias), written only inside [jb, jb + w). */
    const v128_t shared_bias = out->bias && !out->bias_step ? wasm_f32x4_splat(kiln_load1(out->bias, 0, dt)) : zero;
    for (int j = 0; j < w; j += 4) {
      const int n = kiln_min(4, w - j);
      const size_t at = (size_t)jb + j;
      v128_t y = wasm_f32x4_mul(wasm_v128_load(work + j), alpha);
      if (out->accumulate) y = wasm_f32x4_add(y, n == 4 ? kiln_load4(out->out, at, ct) : mm_load_n(out->out, at, n, ct));
      if (out->bias) {
        y = wasm_f32x4_add(y, !out->bias_step ? shared_bias
                              : n == 4       ? kiln_load4(out->bias, at, dt)
                                             : mm_load_n(out->bias, at, n, dt));
      }
      if (n == 4) kiln_store4(out->out, at, y, ct);
      else mm_store_n(out->out, at, y, n, ct);
    }
  }
}

void kiln_vector_times_rows(const void* x, int ldx, const void* v, int k, const MatvecOut* out, int j0, int j1,
                            float* work, int dt, int ct) {
  MM_CALL_WITH_DTYPES(dt, ct, vector_times_rows, x, ldx, v, k, out, j0, j1, work);
}
