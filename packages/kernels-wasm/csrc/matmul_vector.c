/*
 * Matrix-vector products: the matmuls whose output is one row (m == 1) or
 * one column (n == 1). Packing buys nothing there (every element of the
 * matrix is used once), so these stream the matrix straight from memory.
 *
 *   rows_dot_vector:   out[i] = sum_p X[i, p] * v[p]     X row-major, ldx >= k
 *   vector_times_rows: out[j] = sum_p v[p] * X[p, j]     X row-major, ldx >= width
 *
 * then out = alpha * sum (+ out if accumulate) (+ bias). bias_step is 1 for
 * a bias per output and 0 for one bias shared by all outputs.
 */
#include "matmul_vector.h"

KILN_INLINE float horizontal_sum(v128_t x) {
  return wasm_f32x4_extract_lane(x, 0) + wasm_f32x4_extract_lane(x, 1) + wasm_f32x4_extract_lane(x, 2) +
         wasm_f32x4_extract_lane(x, 3);
}

KILN_INLINE void store_output(float* out, float sum, float alpha, int accumulate, const float* bias) {
  float y = alpha * sum;
  if (accumulate) y += *out;
  if (bias) y += *bias;
  *out = y;
}

/* One row of X dotted with v, four independent accumulators over p. */
static float row_dot(const float* row, const float* v, int k) {
  v128_t acc0 = wasm_f32x4_splat(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int p = 0;
  for (; p + 16 <= k; p += 16) {
    acc0 = KILN_MADD(acc0, wasm_v128_load(row + p), wasm_v128_load(v + p));
    acc1 = KILN_MADD(acc1, wasm_v128_load(row + p + 4), wasm_v128_load(v + p + 4));
    acc2 = KILN_MADD(acc2, wasm_v128_load(row + p + 8), wasm_v128_load(v + p + 8));
    acc3 = KILN_MADD(acc3, wasm_v128_load(row + p + 12), wasm_v128_load(v + p + 12));
  }
  for (; p + 4 <= k; p += 4) acc0 = KILN_MADD(acc0, wasm_v128_load(row + p), wasm_v128_load(v + p));
  float sum = horizontal_sum(wasm_f32x4_add(wasm_f32x4_add(acc0, acc1), wasm_f32x4_add(acc2, acc3)));
  for (; p < k; p++) sum += row[p] * v[p];
  return sum;
}

void kiln_rows_dot_vector(const float* x, int ldx, const float* v, int k, float* out, int i0, int i1, float alpha,
                          int accumulate, const float* bias, int bias_step) {
  for (int i = i0; i < i1; i++) {
    const float sum = row_dot(x + (size_t)i * ldx, v, k);
    store_output(out + i, sum, alpha, accumulate, bias ? bias + (size_t)i * bias_step : NULL);
  }
}

/* Columns [j, j + 4*VECS) of v^T X, accumulated in registers over all of p. */
#define VECS 6 /* 6 accumulators + 6 loads + 1 splat fit V8's 15 registers */
static void columns_block(const float* x, int ldx, const float* v, int k, int j, v128_t acc[VECS]) {
  for (int q = 0; q < VECS; q++) acc[q] = wasm_f32x4_splat(0.0f);
  const float* row = x + j;
  for (int p = 0; p < k; p++, row += ldx) {
    const v128_t vp = wasm_f32x4_splat(v[p]);
    for (int q = 0; q < VECS; q++) acc[q] = KILN_MADD(acc[q], vp, wasm_v128_load(row + 4 * q));
  }
}

void kiln_vector_times_rows(const float* x, int ldx, const float* v, int k, float* out, int j0, int j1, float alpha,
                            int accumulate, const float* bias, int bias_step) {
  int j = j0;
  for (; j + 4 * VECS <= j1; j += 4 * VECS) {
    v128_t acc[VECS];
    columns_block(x, ldx, v, k, j, acc);
    const v128_t alpha_v = wasm_f32x4_splat(alpha);
    for (int q = 0; q < VECS; q++) {
      float* o = out + j + 4 * q;
      v128_t y = wasm_f32x4_mul(acc[q], alpha_v);
      if (accumulate) y = wasm_f32x4_add(y, wasm_v128_load(o));
      if (bias) {
        y = wasm_f32x4_add(y, bias_step ? wasm_v128_load(bias + j + 4 * q) : wasm_f32x4_splat(*bias));
      }
      wasm_v128_store(o, y);
    }
  }
  /* Remaining columns one at a time (fewer than 4*VECS). */
  for (; j < j1; j++) {
    float sum = 0.0f;
    const float* col = x + j;
    for (int p = 0; p < k; p++, col += ldx) sum += v[p] * *col;
    store_output(out + j, sum, alpha, accumulate, bias ? bias + (size_t)j * bias_step : NULL);
  }
}
