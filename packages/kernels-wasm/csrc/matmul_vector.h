/* Matrix-vector products for matmuls with one output row or column (see matmul_vector.c). */
#ifndef KILN_MATMUL_VECTOR_H
#define KILN_MATMUL_VECTOR_H

#include "kiln_simd.h"

/* What happens to each output's sum: out[i] = alpha * sum (+ out[i] when accumulate) (+ bias[i * bias_step]). */
typedef struct {
  void* out;          /* elements of dtype ct (see below) */
  float alpha;
  int32_t accumulate;
  const void* bias;   /* NULL: no bias */
  int32_t bias_step;  /* 1: a bias per output; 0: bias[0] for every output */
} MatvecOut;

/*
 * Every matrix, vector and bias element is in dtype `dt` (KILN_DT_* in
 * kiln_storage.h), the outputs in `ct`: dt, or KILN_DT_F32 for a 16-bit dt;
 * `work` is the calling thread's f32 scratch, at least 2048 floats and, for
 * a 16-bit dt, k.
 */

/* sum_i = sum_p X[i*ldx + p] * v[p] for i in [i0, i1): each output is a row of X dotted with v. */
void kiln_rows_dot_vector(const void* x, int ldx, const void* v, int k, const MatvecOut* out, int i0, int i1,
                          float* work, int dt, int ct);

/* sum_j = sum_p v[p] * X[p*ldx + j] for j in [j0, j1): each output is a column of X weighted by v. */
void kiln_vector_times_rows(const void* x, int ldx, const void* v, int k, const MatvecOut* out, int j0, int j1,
                            float* work, int dt, int ct);

#endif
