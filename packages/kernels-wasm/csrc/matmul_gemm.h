/*
 * The matmul argument block and the pieces of csrc/matmul.c that other kernel
 * families reuse to run one GEMM on part of the pool (grouped_matmul.c).
 */
#ifndef KILN_MATMUL_GEMM_H
#define KILN_MATMUL_GEMM_H

#include "kiln_simd.h"

/* Host-written argument block; field order and sizes are mirrored in src/matmul-call.ts. */
typedef struct {
  int32_t m, n, k, batch;
  const void* a;           /* elements of the entry's dtype */
  const void* b;
  void* c;                 /* the entry's dtype, or f32 when c_f32 */
  const void* bias;        /* NULL: no bias */
  int32_t stride_a, stride_b, stride_c;
  int32_t trans_a, trans_b, accumulate;
  float alpha;
  uint8_t* scratch;        /* thread t uses scratch + t * scratch_stride */
  uint32_t scratch_stride; /* bytes, at least kiln_matmul_scratch_bytes() */
  int32_t c_f32;           /* 1: C is f32 while A, B and bias are 16-bit (parameter gradients in f32) */
  uint32_t unused[3];      /* words 18-20 */
  int32_t lda;             /* elements between A's stored rows: k, or m when trans_a, or more */
  /* The counters of a call, each on a cache line of its own (the block is 64-byte aligned), zeroed by the host: */
  uint32_t pad_a[10];
  uint32_t tickets;        /* work items (or batch items) handed out so far (matmul.c) */
  uint32_t pad_b[15];
  uint32_t packed;         /* pieces of B panels packed so far (shared-panel path) */
  uint32_t done;           /* blocks of C done so far (shared-panel path) */
  uint32_t sleepers;       /* threads asleep on `packed` or `done` (shared-panel path) */
} MatmulArgs;

/*
 * The functions below treat `g` as one matrix (batch item 0; batch and the
 * strides are ignored), use thread `thread`'s scratch, and take dt =
 * KILN_DT_F32, KILN_DT_BF16 or KILN_DT_F16, the dtype of A, B and bias (C's
 * is f32 when g->c_f32, else dt). Every element of C is summed in the same order whatever
 * the rectangle or part, so results do not depend on the thread count.
 */

/* C(m0:m1, n0:n1) by the packed loop nest (no matrix-vector shortcut). */
void kiln_gemm_rect(const MatmulArgs* g, int m0, int m1, int n0, int n1, int thread, int dt);

/*
 * C(row, n0:n1) as a matrix-vector product (matmul_vector.c): B streams from
 * memory unpacked, which pays when B serves one row. Falls back to
 * kiln_gemm_rect for transposed A, a bias, or a 16-bit k too long for scratch.
 */
void kiln_gemm_row(const MatmulArgs* g, int row, int n0, int n1, int thread, int dt);

/* Part `part` of `parts` of C, split as kiln_matmul_* splits one batch item among threads. */
void kiln_gemm_part(const MatmulArgs* g, int part, int parts, int thread, int dt);

/* The rectangle of C (m, n) that part `part` of `parts` takes, on the grid kiln_matmul_* uses. */
void kiln_gemm_grid(int m, int n, int k, int part, int parts, int* m0, int* m1, int* n0, int* n1);

#endif
