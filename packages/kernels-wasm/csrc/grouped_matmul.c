/*
 * grouped matmul: one GEMM per group of rows, with f32, bf16 or f16 storage.
 *
 * offsets (i32, groups + 1, read here at run time) split the rows of A into
 * groups: group g owns rows [offsets[g], offsets[g+1]), possibly none.
 *
 *   forward:      C[r, :] = (accumulate ? C[r, :] : 0) + A[r, :] @ op(B_g)   for r in group g
 *   weight grad:  dB_g += dC_g^T @ A_g                                        for every non-empty g
 *
 * A is (rows, k); B holds the groups' matrices back to back, B_g at g*k*n:
 * (k, n), or (n, k) when trans_b; C and dC are (rows, n); dB_g is (n, k) at
 * g*n*k. With c_f32, C (dB) is f32 while A and B (dC) are 16-bit (a weight
 * gradient kept in f32). Each group's product is the matmul loop nest of matmul.c
 * (matmul_gemm.h): packing, register tiles, f32 sums, a 16-bit C rounded once;
 * the forward runs a group of few rows as matrix-vector products instead.
 *
 * Threads: the forward splits C (rows, n) into one rectangle per thread, on the
 * grid a plain matmul of that size would use, and each thread runs the part of
 * every group that falls in its rectangle, so the work is balanced however the
 * rows fall into groups. The weight grad splits each group's dB_g among all
 * threads. No two threads write the same element, and every element's sum
 * runs in an order fixed by the shapes and the group sizes alone, so results
 * do not depend on the thread count.
 */
#include "matmul_dtype.h"
#include "matmul_gemm.h"

/* Host-written argument block; mirrored in src/backend-grouped-matmul.ts. */
typedef struct {
  int32_t rows, n, k, groups, dtype;  /* dtype: KILN_DT_F32, KILN_DT_BF16 or KILN_DT_F16 */
  const void* a;
  const void* b;          /* forward: B;  weight grad: dC */
  void* c;                /* forward: C;  weight grad: dB */
  const int32_t* offsets;
  int32_t trans_b, accumulate;
  uint8_t* scratch;       /* matmul scratch, thread t at scratch + t * scratch_stride */
  uint32_t scratch_stride;
  int32_t c_f32;          /* 1: C (dB) in f32, A and B in the 16-bit dtype */
} GroupedArgs;

/*
 * Groups of at most this many rows skip packing: each row is a matrix-vector
 * product streaming B_g (matmul_vector.c). Packing B_g costs about as much as
 * streaming it ~16 times (n = k = 512, f32 and bf16, one thread; measured
 * with tooling/bench/grouped-matmul-wasm.mjs --rows 64..256 --groups 16).
 */
#ifndef VECTOR_ROWS
#define VECTOR_ROWS 16
#endif

KILN_INLINE size_t elem_bytes(int dt) { return dt == KILN_DT_F32 ? 4 : 2; }

/* A matmul argument block for one matrix, with everything but the shape and operands filled in. */
KILN_INLINE MatmulArgs one_matrix(const GroupedArgs* a, int trans_a, int trans_b, int accumulate) {
  MatmulArgs g = {0};
  g.batch = 1;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.accumulate = accumulate;
  g.alpha = 1.0f;
  g.scratch = a->scratch;
  g.scratch_stride = a->scratch_stride;
  g.c_f32 = a->c_f32;
  return g;
}

KILN_INLINE void grouped_forward(const GroupedArgs* a, int thread, int nthreads, int dt) {
  const size_t es = elem_bytes(dt), ces = a->c_f32 ? 4 : es;
  const int n = a->n, k = a->k;
  int m0, m1, n0, n1;
  kiln_gemm_grid(a->rows, n, k, thread, nthreads, &m0, &m1, &n0, &n1);
  if (m1 <= m0 || n1 <= n0) return;
  MatmulArgs g = one_matrix(a, 0, a->trans_b, a->accumulate);
  g.n = n;
  g.k = k;
  g.lda = k;
  for (int grp = 0; grp < a->groups; grp++) {
    const int r0 = a->offsets[grp], r1 = a->offsets[grp + 1];
    const int lo = kiln_max(r0, m0), hi = kiln_min(r1, m1);
    if (hi <= lo) continue;
    g.m = r1 - r0;
    g.a = (const uint8_t*)a->a + (size_t)r0 * k * es;
    g.b = (const uint8_t*)a->b + (size_t)grp * k * n * es;
    g.c = (uint8_t*)a->c + (size_t)r0 * n * ces;
    if (r1 - r0 <= VECTOR_ROWS) {
      for (int r = lo; r < hi; r++) kiln_gemm_row(&g, r - r0, n0, n1, thread, dt);
    } else {
      kiln_gemm_rect(&g, lo - r0, hi - r0, n0, n1, thread, dt);
    }
  }
}

/* dB_g (n, k) += op(dC_g) @ A_g with op(dC_g) = dC_g^T: a matmul with m = n, n = k, inner = the group's rows. */
KILN_INLINE void grouped_weight_grad(const GroupedArgs* a, int thread, int nthreads, int dt) {
  const size_t es = elem_bytes(dt), ces = a->c_f32 ? 4 : es;
  const int n = a->n, k = a->k;
  MatmulArgs g = one_matrix(a, 1, 0, 1);
  g.m = n;
  g.n = k;
  g.lda = n;
  for (int grp = 0; grp < a->groups; grp++) {
    const int r0 = a->offsets[grp], r1 = a->offsets[grp + 1];
    if (r1 <= r0) continue; /* an empty group leaves dB_g untouched */
    g.k = r1 - r0;
    g.a = (const uint8_t*)a->b + (size_t)r0 * n * es; /* dC_g stored (rows_g, n): op(A) transposed, lda = n */
    g.b = (const uint8_t*)a->a + (size_t)r0 * k * es; /* A_g stored (rows_g, k): ldb = k */
    g.c = (uint8_t*)a->c + (size_t)grp * n * k * ces;
    kiln_gemm_part(&g, thread, nthreads, thread, dt);
  }
}

KILN_EXPORT(kiln_grouped_matmul)
void kiln_grouped_matmul(const GroupedArgs* a, int thread, int nthreads) {
  switch (a->dtype) {
    case KILN_DT_F32: grouped_forward(a, thread, nthreads, KILN_DT_F32); break;
    case KILN_DT_BF16: grouped_forward(a, thread, nthreads, KILN_DT_BF16); break;
    case KILN_DT_F16: grouped_forward(a, thread, nthreads, KILN_DT_F16); break;
  }
}

KILN_EXPORT(kiln_grouped_matmul_weight_grad)
void kiln_grouped_matmul_weight_grad(const GroupedArgs* a, int thread, int nthreads) {
  switch (a->dtype) {
    case KILN_DT_F32: grouped_weight_grad(a, thread, nthreads, KILN_DT_F32); break;
    case KILN_DT_BF16: grouped_weight_grad(a, thread, nthreads, KILN_DT_BF16); break;
    case KILN_DT_F16: grouped_weight_grad(a, thread, nthreads, KILN_DT_F16); break;
  }
}
