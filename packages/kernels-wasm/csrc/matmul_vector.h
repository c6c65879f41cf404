/* Matrix-vector products for matmuls with one output row or column (see matmul_vector.c). */
#ifndef KILN_MATMUL_VECTOR_H
#define KILN_MATMUL_VECTOR_H

#include "kiln_simd.h"

/*
 * out[i] = alpha * sum_p X[i*ldx + p] * v[p] (+ out[i] when accumulate) (+ bias[i*bias_step])
 * for i in [i0, i1): each output is a row of X dotted with v.
 */
void kiln_rows_dot_vector(const float* x, int ldx, const float* v, int k, float* out, int i0, int i1, float alpha,
                          int accumulate, const float* bias, int bias_step);

/*
 * out[j] = alpha * sum_p v[p] * X[p*ldx + j] (+ out[j] when accumulate) (+ bias[j*bias_step])
 * for j in [j0, j1): each output is a column of X weighted by v.
 */
void kiln_vector_times_rows(const float* x, int ldx, const float* v, int k, float* out, int j0, int j1, float alpha,
                            int accumulate, const float* bias, int bias_step);

#endif
