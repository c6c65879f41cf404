/*
 * embedding: table lookup and its gradient.
 *
 * ids are i32 (count), each in [0, vocab) (the host checks them); table and dTable
 * are (vocab, dim), out and dOut are (count, dim), all row-major in the storage
 * dtype (f32, bf16 or f16); dTable may instead be f32 for a 16-bit dOut (grad_dtype).
 *
 *   forward:   out[i, :] = table[ids[i], :]            rows are copied as bytes
 *   backward:  dTable[v, :] += sum over i with ids[i] = v of dOut[i, :]
 *
 * Forward: threads take contiguous ranges of the count rows.
 *
 * Backward, in two calls:
 *   1. kiln_embedding_group (one thread) links the positions of each id into a
 *      list in increasing position order: first[v] is v's first position (-1: none),
 *      next[i] the position after i with the same id (-1: last), used[0..n_used) the
 *      distinct ids, and before[u] the number of positions of used[0..u). first,
 *      next, used and before live in scratch.
 *   2. kiln_embedding_backward: threads split the distinct ids, balanced by their
 *      positions (thread t takes the ids whose positions start in its share of
 *      [0, count)). For each of its ids a thread sums the id's dOut rows in f32, in
 *      position order, and adds the sum to the dTable row once (one rounding for
 *      bf16 / f16). No two threads write the same row and the order of every sum is
 *      fixed, so results are the same on every run.
 */
#include "kiln_storage.h"

typedef struct {
  int32_t count;
  int32_t vocab;
  int32_t dim;
  int32_t dtype;
  const int32_t* ids;
  const void* table;    /* forward: table;  backward: dOut */
  void* out;            /* forward: out;    backward: dTable */
  int32_t* first;       /* backward scratch: vocab entries */
  int32_t* next;        /* backward scratch: count entries */
  int32_t* used;        /* backward scratch: count entries */
  int32_t* before;      /* backward scratch: count entries */
  int32_t n_used;       /* written by kiln_embedding_group */
  int32_t grad_dtype;   /* backward: dTable's dtype, dtype or KILN_DT_F32 */
} EmbeddingArgs;

/* Columns summed per pass over an id's positions (f32 accumulators on the stack). */
#define COL_BLOCK 512

static void copy_bytes(char* dst, const char* src, size_t n) {
  size_t k = 0;
  for (; k + 16 <= n; k += 16) wasm_v128_store(dst + k, wasm_v128_load(src + k));
  if (k + 8 <= n) {
    *(uint64_t*)(dst + k) = *(const uint64_t*)(src + k);
    k += 8;
  }
  for (; k < n; k++) dst[k] = src[k];
}

KILN_EXPORT(kiln_embedding_forward)
void kiln_embedding_forward(const EmbeddingArgs* a, int thread, int nthreads) {
  const size_t row_bytes = (size_t)a->dim * (a->dtype == KILN_DT_F32 ? 4 : 2);
  size_t i0, i1;
  kiln_split((size_t)a->count, 1, thread, nthreads, &i0, &i1);
  for (size_t i = i0; i < i1; i++) {
    copy_bytes((char*)a->out + i * row_bytes, (const char*)a->table + (size_t)a->ids[i] * row_bytes, row_bytes);
  }
}

KILN_EXPORT(kiln_embedding_group)
void kiln_embedding_group(EmbeddingArgs* a, int thread, int nthreads) {
  (void)nthreads;
  if (thread != 0) return;
  for (int32_t v = 0; v < a->vocab; v++) a->first[v] = -1;
  int32_t n_used = 0;
  /* Walk backwards so that each list comes out in increasing position order. */
  for (int32_t i = a->count - 1; i >= 0; i--) {
    const int32_t v = a->ids[i];
    if (a->first[v] < 0) a->used[n_used++] = v;
    a->next[i] = a->first[v];
    a->first[v] = i;
  }
  int32_t seen = 0;
  for (int32_t u = 0; u < n_used; u++) {
    a->before[u] = seen;
    for (int32_t i = a->first[a->used[u]]; i >= 0; i = a->next[i]) seen++;
  }
  a->n_used = n_used;
}

/* First u in [0, n_used) whose positions start at or after position p (n_used if none). */
static int32_t first_used_from(const EmbeddingArgs* a, size_t p) {
  int32_t lo = 0, hi = a->n_used;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if ((size_t)a->before[mid] < p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* dTable[v, :] += sum of v's dOut rows, for the distinct ids used[u0..u1); dOut in dt, dTable in gt. */
KILN_INLINE void accumulate_ids(const EmbeddingArgs* a, int32_t u0, int32_t u1, const int dt, const int gt) {
  const size_t dim = (size_t)a->dim;
  float acc[COL_BLOCK] __attribute__((aligned(16)));
  for (int32_t u = u0; u < u1; u++) {
    const int32_t v = a->used[u];
    const size_t trow = (size_t)v * dim;
    for (size_t b0 = 0; b0 < dim; b0 += COL_BLOCK) {
      const size_t b1 = dim - b0 < COL_BLOCK ? dim : b0 + COL_BLOCK;
      const size_t body = b0 + ((b1 - b0) & ~(size_t)3);
      const int tail = (int)(b1 - body);
      for (size_t k = b0; k < b1; k += 4) wasm_v128_store(acc + (k - b0), wasm_f32x4_splat(0.0f));
      for (int32_t i = a->first[v]; i >= 0; i = a->next[i]) {
        const size_t drow = (size_t)i * dim;
        for (size_t k = b0; k < body; k += 4) {
          float* p = acc + (k - b0);
          wasm_v128_store(p, wasm_f32x4_add(wasm_v128_load(p), kiln_load4(a->table, drow + k, dt)));
        }
        if (tail) {
          float* p = acc + (body - b0);
          wasm_v128_store(p, wasm_f32x4_add(wasm_v128_load(p), kiln_load_partial(a->table, drow + body, tail, dt, 0.0f)));
        }
      }
      for (size_t k = b0; k < body; k += 4) {
        kiln_store4(a->out, trow + k, wasm_f32x4_add(kiln_load4(a->out, trow + k, gt), wasm_v128_load(acc + (k - b0))), gt);
      }
      if (tail) {
        const v128_t sum = wasm_f32x4_add(kiln_load_partial(a->out, trow + body, tail, gt, 0.0f), wasm_v128_load(acc + (body - b0)));
        kiln_store_partial(a->out, trow + body, sum, tail, gt);
      }
    }
  }
}

KILN_EXPORT(kiln_embedding_backward)
void kiln_embedding_backward(const EmbeddingArgs* a, int thread, int nthreads) {
  size_t p0, p1;
  kiln_split((size_t)a->count, 1, thread, nthreads, &p0, &p1);
  const int32_t u0 = first_used_from(a, p0);
  const int32_t u1 = first_used_from(a, p1);
  const int wide = a->grad_dtype == KILN_DT_F32;
  switch (a->dtype) {
    case KILN_DT_F32: accumulate_ids(a, u0, u1, KILN_DT_F32, KILN_DT_F32); break;
    case KILN_DT_BF16:
      if (wide) accumulate_ids(a, u0, u1, KILN_DT_BF16, KILN_DT_F32);
      else accumulate_ids(a, u0, u1, KILN_DT_BF16, KILN_DT_BF16);
      break;
    case KILN_DT_F16:
      if (wide) accumulate_ids(a, u0, u1, KILN_DT_F16, KILN_DT_F32);
      else accumulate_ids(a, u0, u1, KILN_DT_F16, KILN_DT_F16);
      break;
  }
}
