/*
 * reduce: whole-buffer sums and column sums.
 *
 *   sum         partials[t] = sum_{i in chunk t} x[i]
 *   sumSquares  partials[t] = sum_{i in chunk t} x[i]^2
 *               (the host adds partials[0], partials[1], ... in that order to
 *               0 or to the previous output, so a result depends only on the
 *               data and the thread count)
 *   sumRows     out[j] = (accumulate ? out[j] : 0) + sum_i x[i, j]
 *
 * x holds n elements (sum, sumSquares) or (rows, cols) row-major (sumRows) in
 * the storage dtype; partials are f64, one per thread; out (sumRows) is in its
 * own dtype, grad_dtype: x's, or f32 for a 16-bit x (a bias gradient kept in f32).
 *
 * sum / sumSquares: thread t takes a contiguous chunk; inside it, blocks of
 * 512 elements are summed in 16 f32 lanes (32 terms per lane) and each block
 * total is added to an f64 accumulator. sumRows: threads take disjoint column ranges, so every
 * output column has one owner; a thread walks its columns 32 at a time down
 * all rows, summing 256-row blocks in f32 registers and adding each block to
 * an f32 total (the same order for any thread count).
 */
#include "kiln_storage.h"

typedef struct {
  const void* x;
  double* partials; /* nthreads entries */
  int32_t n;
  int32_t dtype;
} ReduceArgs;

typedef struct {
  const void* x;
  void* out;
  int32_t rows;
  int32_t cols;
  int32_t dtype;       /* x */
  int32_t accumulate;
  int32_t grad_dtype;  /* out: dtype, or KILN_DT_F32 */
} SumRowsArgs;

#define REDUCE_BLOCK 512
#define CHUNK_ALIGN 32
#define ROW_BLOCK 256
#define COL_BLOCK 32

KILN_INLINE v128_t sq_or_id(v128_t v, int square) { return square ? wasm_f32x4_mul(v, v) : v; }

KILN_INLINE double reduce_range(const void* x, size_t lo, size_t hi, int dt, int square) {
  double total = 0;
  for (size_t b = lo; b < hi; b += REDUCE_BLOCK) {
    const size_t end = b + REDUCE_BLOCK < hi ? b + REDUCE_BLOCK : hi;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    size_t i = b;
    for (; i + 16 <= end; i += 16) {
      v128_t a, c, d, e;
      kiln_load8(x, i, dt, &a, &c);
      kiln_load8(x, i + 8, dt, &d, &e);
      if (square) {
        s0 = KILN_MADD(s0, a, a);
        s1 = KILN_MADD(s1, c, c);
        s2 = KILN_MADD(s2, d, d);
        s3 = KILN_MADD(s3, e, e);
      } else {
        s0 = wasm_f32x4_add(s0, a);
        s1 = wasm_f32x4_add(s1, c);
        s2 = wasm_f32x4_add(s2, d);
        s3 = wasm_f32x4_add(s3, e);
      }
    }
    for (; i + 4 <= end; i += 4) s0 = wasm_f32x4_add(s0, sq_or_id(kiln_load4(x, i, dt), square));
    if (i < end) s1 = wasm_f32x4_add(s1, sq_or_id(kiln_load_partial(x, i, end - i, dt, 0.0f), square));
    total += (double)kiln_hsum(wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3)));
  }
  return total;
}

KILN_INLINE void reduce_entry(const ReduceArgs* g, int thread, int nthreads, int square) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  double s;
  switch (g->dtype) {
    case KILN_DT_F32: s = reduce_range(g->x, lo, hi, KILN_DT_F32, square); break;
    case KILN_DT_BF16: s = reduce_range(g->x, lo, hi, KILN_DT_BF16, square); break;
    default: s = reduce_range(g->x, lo, hi, KILN_DT_F16, square); break;
  }
  g->partials[thread] = s;
}

KILN_EXPORT(kiln_sum)
void kiln_sum(const ReduceArgs* g, int thread, int nthreads) { reduce_entry(g, thread, nthreads, 0); }

KILN_EXPORT(kiln_sum_squares)
void kiln_sum_squares(const ReduceArgs* g, int thread, int nthreads) { reduce_entry(g, thread, nthreads, 1); }

/* ---- sumRows ---- */

KILN_INLINE v128_t out_initial(const SumRowsArgs* g, size_t j, size_t count, int gt) {
  if (!g->accumulate) return wasm_f32x4_splat(0);
  return count == 4 ? kiln_load4(g->out, j, gt) : kiln_load_partial(g->out, j, count, gt, 0.0f);
}

/* Columns [j, j + 32): eight vectors per row. x in dt, out in gt. */
KILN_INLINE void sum_rows_block32(const SumRowsArgs* g, size_t j, int dt, int gt) {
  const size_t rows = (size_t)g->rows, cols = (size_t)g->cols;
  v128_t total[8];
  for (int k = 0; k < 8; k++) total[k] = out_initial(g, j + 4 * (size_t)k, 4, gt);
  for (size_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
    const size_t r1 = r0 + ROW_BLOCK < rows ? r0 + ROW_BLOCK : rows;
    v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (size_t r = r0; r < r1; r++) {
      const size_t o = r * cols + j;
      v128_t a, b;
      kiln_load8(g->x, o, dt, &a, &b);
      s0 = wasm_f32x4_add(s0, a);
      s1 = wasm_f32x4_add(s1, b);
      kiln_load8(g->x, o + 8, dt, &a, &b);
      s2 = wasm_f32x4_add(s2, a);
      s3 = wasm_f32x4_add(s3, b);
      kiln_load8(g->x, o + 16, dt, &a, &b);
      s4 = wasm_f32x4_add(s4, a);
      s5 = wasm_f32x4_add(s5, b);
      kiln_load8(g->x, o + 24, dt, &a, &b);
      s6 = wasm_f32x4_add(s6, a);
      s7 = wasm_f32x4_add(s7, b);
    }
    total[0] = wasm_f32x4_add(total[0], s0);
    total[1] = wasm_f32x4_add(total[1], s1);
    total[2] = wasm_f32x4_add(total[2], s2);
    total[3] = wasm_f32x4_add(total[3], s3);
    total[4] = wasm_f32x4_add(total[4], s4);
    total[5] = wasm_f32x4_add(total[5], s5);
    total[6] = wasm_f32x4_add(total[6], s6);
    total[7] = wasm_f32x4_add(total[7], s7);
  }
  for (int k = 0; k < 8; k += 2) kiln_store8(g->out, j + 4 * (size_t)k, total[k], total[k + 1], gt);
}

/* Columns [j, j + count), count <= 4: one vector per row. */
KILN_INLINE void sum_rows_block4(const SumRowsArgs* g, size_t j, size_t count, int dt, int gt) {
  const size_t rows = (size_t)g->rows, cols = (size_t)g->cols;
  v128_t total = out_initial(g, j, count, gt);
  for (size_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
    const size_t r1 = r0 + ROW_BLOCK < rows ? r0 + ROW_BLOCK : rows;
    v128_t s = wasm_f32x4_splat(0);
    if (count == 4) {
      for (size_t r = r0; r < r1; r++) s = wasm_f32x4_add(s, kiln_load4(g->x, r * cols + j, dt));
    } else {
      for (size_t r = r0; r < r1; r++) s = wasm_f32x4_add(s, kiln_load_partial(g->x, r * cols + j, count, dt, 0.0f));
    }
    total = wasm_f32x4_add(total, s);
  }
  if (count == 4) kiln_store4(g->out, j, total, gt);
  else kiln_store_partial(g->out, j, total, count, gt);
}

KILN_INLINE void sum_rows_range(const SumRowsArgs* g, size_t lo, size_t hi, int dt, int gt) {
  size_t j = lo;
  for (; j + COL_BLOCK <= hi; j += COL_BLOCK) sum_rows_block32(g, j, dt, gt);
  for (; j < hi; j += 4) sum_rows_block4(g, j, hi - j < 4 ? hi - j : 4, dt, gt);
}

KILN_EXPORT(kiln_sum_rows)
void kiln_sum_rows(const SumRowsArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->cols, 16, thread, nthreads, &lo, &hi);
  const int wide = g->grad_dtype == KILN_DT_F32;
  switch (g->dtype) {
    case KILN_DT_F32: sum_rows_range(g, lo, hi, KILN_DT_F32, KILN_DT_F32); break;
    case KILN_DT_BF16:
      if (wide) sum_rows_range(g, lo, hi, KILN_DT_BF16, KILN_DT_F32);
      else sum_rows_range(g, lo, hi, KILN_DT_BF16, KILN_DT_BF16);
      break;
    default:
      if (wide) sum_rows_range(g, lo, hi, KILN_DT_F16, KILN_DT_F32);
      else sum_rows_range(g, lo, hi, KILN_DT_F16, KILN_DT_F16);
      break;
  }
}
