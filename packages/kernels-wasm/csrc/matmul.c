/*
 * matmul: batched GEMM with f32, bf16 or f16 storage.
 *
 *   for each batch item i:  C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
 *
 * Row-major throughout. op(A) is (m, k): A stored (m, k) with lda = k, or
 * (k, m) with lda = m when trans_a. op(B) is (k, n): B stored (k, n) with
 * ldb = n, or (n, k) with ldb = k when trans_b. C is (m, n), ldc = n.
 * Batch item i starts at i * stride_{a,b,c} elements (a stride of 0
 * broadcasts one matrix). bias (length n, optional) is added to every row.
 *
 * Storage: A, B and bias are in the entry's dtype (kiln_matmul_f32, _bf16,
 * _f16; see matmul_dtype.h); C is too, or f32 with 16-bit A and B when
 * MatmulArgs.c_f32 is set (parameter gradients kept in f32). Products and
 * sums are f32; a 16-bit C is rounded once, to nearest even, when its final
 * value is stored; an f32 C is read and written without any rounding.
 *
 * Algorithm (the BLIS/Goto loop nest):
 *   jc over n in NC columns
 *     pc over k in KC steps           pack B(pc:pc+KC, jc:jc+NC) into Bp
 *       ic over m in MC rows          pack A(ic:ic+MC, pc:pc+KC) into Ap
 *         jr over NR-column slivers of Bp      (one sliver, KC x NR, stays in L1)
 *           ir over MR-row slivers of Ap       (the MC x KC block stays in L2)
 *             MR x NR register tile += Ap sliver @ Bp sliver
 * Packing converts 16-bit operands to f32, so the register tile is the same
 * for every dtype. With f32 storage each k block adds its partial sums into C.
 * With 16-bit storage (and k > KC) they go into an f32 block `Cp` instead, and
 * only the last k block writes C; to bound Cp, the rows of a thread's
 * rectangle are taken MB at a time (a loop between jc and pc).
 *
 * The block sizes, packing and packed layouts of Ap and Bp are in
 * matmul_pack.h; the register tile product and the 16-bit path in
 * matmul_half.h (its f32-C instances in matmul_wide.c). Cp is MB x NC f32, row-major (16-bit A and B only; an f32 C
 * of 16-bit A and B goes through Cp too, so one code path serves both).
 *
 * Threads: each thread takes a rectangle of C (whole batch items when the
 * batch divides well among threads), packs its own A and B blocks into its
 * own scratch, and writes only its own rectangle, so no synchronisation is
 * needed inside the kernel.
 *
 * matmul_gemm.h holds the argument block and the one-matrix entry points that
 * grouped_matmul.c runs per group (a rectangle, one row, a thread's part).
 */
#include "kiln_simd.h"
#include "matmul_dtype.h"
#include "matmul_vector.h"
#include "matmul_gemm.h"
#include "matmul_pack.h"
#include "matmul_half.h"

/* Per-thread scratch: Ap (MC x KC, each value stored 4x), Bp (KC x NC), one spare register tile, Cp (MB x NC). */
#define AP_FLOATS (MC * KC * 4)
#define BP_FLOATS (KC * NC)
#define TILE_FLOATS (MR * NR)
#define CP_FLOATS (MB * NC)

KILN_EXPORT(kiln_matmul_scratch_bytes)
uint32_t kiln_matmul_scratch_bytes(void) {
  return (uint32_t)(AP_FLOATS + BP_FLOATS + TILE_FLOATS + CP_FLOATS) * sizeof(float);
}

KILN_EXPORT(kiln_matmul_tile_shape)
uint32_t kiln_matmul_tile_shape(void) {
  /* MR | NR << 8 | KC << 16: reported by the host for diagnostics. */
  return (uint32_t)MR | ((uint32_t)NR << 8) | ((uint32_t)KC << 16);
}

/* ---- register tile ---------------------------------------------------- */

/*
 * f32 storage: C(rows x cols) = alpha * acc + (keep_c ? C : 0) + (bias ? bias[col] : 0).
 * Full tiles are written straight to C; edge tiles go through `tile`.
 */
KILN_INLINE void register_tile(int kc, const v128_t* restrict ap, const float* restrict bp, float* c, int ldc,
                               int rows, int cols, float alpha, int keep_c, const float* bias, float* tile) {
  v128_t acc[MR][NRV];
  tile_product(kc, ap, bp, acc);

  const v128_t alpha_v = wasm_f32x4_splat(alpha);
  if (rows == MR && cols == NR) {
    for (int r = 0; r < MR; r++) {
      float* crow = c + (size_t)r * ldc;
      for (int v = 0; v < NRV; v++) {
        v128_t x = wasm_f32x4_mul(acc[r][v], alpha_v);
        if (keep_c) x = wasm_f32x4_add(x, wasm_v128_load(crow + 4 * v));
        if (bias) x = wasm_f32x4_add(x, wasm_v128_load(bias + 4 * v));
        wasm_v128_store(crow + 4 * v, x);
      }
    }
    return;
  }
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NRV; v++) wasm_v128_store(tile + r * NR + 4 * v, wasm_f32x4_mul(acc[r][v], alpha_v));
  for (int r = 0; r < rows; r++) {
    float* crow = c + (size_t)r * ldc;
    for (int j = 0; j < cols; j++) {
      float x = tile[r * NR + j];
      if (keep_c) x += crow[j];
      if (bias) x += bias[j];
      crow[j] = x;
    }
  }
}

/* ---- one rectangle of one batch item ---------------------------------- */

/* C(m0:m1, n0:n1) of one batch item in f32, the whole loop nest above. */
__attribute__((noinline)) static void gemm_rect(const MatmulArgs* g, const float* a, const float* b, float* c, int m0, int m1, int n0, int n1,
                      const Scratch* s) {
  const int k = g->k, ldc = g->n;
  const int lda = g->trans_a ? g->m : g->k;
  const int ldb = g->trans_b ? g->k : g->n;
  const float* g_bias = (const float*)g->bias;
  if (m1 <= m0 || n1 <= n0) return;

  if (k == 0) { /* no products: only the epilogue */
    for (int i = m0; i < m1; i++)
      for (int j = n0; j < n1; j++) {
        float x = g->accumulate ? c[(size_t)i * ldc + j] : 0.0f;
        c[(size_t)i * ldc + j] = x + (g_bias ? g_bias[j] : 0.0f);
      }
    return;
  }

  for (int jc = n0; jc < n1; jc += NC) {
    const int nc = kiln_min(NC, n1 - jc);
    for (int pc = 0; pc < k; pc += KC) {
      const int kc = kiln_min(KC, k - pc);
      pack_b(b, ldb, g->trans_b, pc, kc, jc, nc, s->bp, MM_F32);
      /* The first k block applies accumulate and bias; later ones add on. */
      const int keep_c = pc > 0 || g->accumulate;
      const float* bias = pc == 0 && g_bias ? g_bias + jc : NULL;
      for (int ic = m0; ic < m1; ic += MC) {
        const int mc = kiln_min(MC, m1 - ic);
        pack_a(a, lda, g->trans_a, ic, mc, pc, kc, s->ap, MM_F32);
        for (int jr = 0; jr < nc; jr += NR) {
          const int cols = kiln_min(NR, nc - jr);
          const float* bsliver = s->bp + jr * kc;
          const float* bias_j = bias ? bias + jr : NULL;
          for (int ir = 0; ir < mc; ir += MR) {
            const int rows = kiln_min(MR, mc - ir);
            float* ctile = c + (size_t)(ic + ir) * ldc + jc + jr;
            register_tile(kc, s->ap + ir * kc, bsliver, ctile, ldc, rows, cols, g->alpha, keep_c, bias_j, s->tile);
          }
        }
      }
    }
  }
}

/* One function per dtype: V8 compiles a smaller function into tighter code (the f32-C ones are in matmul_wide.c). */
#define GEMM_RECT_HALF(name, dt, ct)                                                                            \
  __attribute__((noinline)) static void name(const MatmulArgs* g, const uint16_t* a, const uint16_t* b, void* c, \
                                             int m0, int m1, int n0, int n1, const Scratch* s) {                \
    gemm_rect_half(g, a, b, c, m0, m1, n0, n1, s, dt, ct);                                                      \
  }
GEMM_RECT_HALF(gemm_rect_bf16, MM_BF16, MM_BF16)
GEMM_RECT_HALF(gemm_rect_f16, MM_F16, MM_F16)

/* C's dtype: the entry's, or f32 for 16-bit A and B when c_f32 is set. */
KILN_INLINE int c_dtype(const MatmulArgs* g, int dt) { return g->c_f32 ? MM_F32 : dt; }

/* C(m0:m1, n0:n1) of one batch item (a, b, c its first elements) by the function for dt and C's dtype. */
static void gemm_rect_any(const MatmulArgs* g, const void* a, const void* b, void* c, int m0, int m1, int n0, int n1,
                          const Scratch* s, int dt) {
  const int wide = g->c_f32;
  if (dt == MM_F32) gemm_rect(g, (const float*)a, (const float*)b, (float*)c, m0, m1, n0, n1, s);
  else if (dt == MM_BF16) (wide ? kiln_gemm_rect_bf16_c_f32 : gemm_rect_bf16)(g, a, b, c, m0, m1, n0, n1, s);
  else (wide ? kiln_gemm_rect_f16_c_f32 : gemm_rect_f16)(g, a, b, c, m0, m1, n0, n1, s);
}

/* ---- splitting the work among threads --------------------------------- */

/* [lo, hi) of `units` split into `parts` near-equal ranges, scaled by `unit`. */
KILN_INLINE void split_range(int total, int unit, int part, int parts, int* lo, int* hi) {
  const int units = (total + unit - 1) / unit;
  *lo = kiln_min(total, (int)((int64_t)units * part / parts) * unit);
  *hi = kiln_min(total, (int)((int64_t)units * (part + 1) / parts) * unit);
}

/*
 * Chooses a tm x tn grid (tm * tn == nthreads) over C that minimises the
 * largest thread's work: its padded tile flops plus its packing traffic.
 */
static void thread_grid(int m, int n, int k, int nthreads, int* tm_out) {
  const int64_t mb = (m + MR - 1) / MR, nb = (n + NR - 1) / NR;
  int64_t best = INT64_MAX;
  int best_tm = 1;
  for (int tm = 1; tm <= nthreads; tm++) {
    if (nthreads % tm) continue;
    const int tn = nthreads / tm;
    const int64_t rows = (mb + tm - 1) / tm * MR, cols = (nb + tn - 1) / tn * NR;
    const int64_t cost = rows * cols * k + 8 * (rows + cols) * (int64_t)k;
    if (cost < best) best = cost, best_tm = tm;
  }
  *tm_out = best_tm;
}

void kiln_gemm_grid(int m, int n, int k, int part, int parts, int* m0, int* m1, int* n0, int* n1) {
  int tm;
  thread_grid(m, n, k, parts, &tm);
  const int tn = parts / tm;
  split_range(m, MR, part / tn, tm, m0, m1);
  split_range(n, NR, part % tn, tn, n0, n1);
}

/* One output row or column: a matrix-vector product, no packing (matmul_vector.c). */
KILN_INLINE void matvec_part(const MatmulArgs* g, const void* a, const void* b, void* c, int part, int parts,
                             float* work, int dt, int ct) {
  int lo, hi;
  if (g->m == 1) {
    /* C(1, n) = a(k) . op(B): a is contiguous whether or not trans_a; one bias per output. */
    const MatvecOut out = {c, g->alpha, g->accumulate, g->bias, 1};
    if (!g->trans_b) {
      split_range(g->n, 16, part, parts, &lo, &hi);
      kiln_vector_times_rows(b, g->n, a, g->k, &out, lo, hi, work, dt, ct);
    } else {
      split_range(g->n, 4, part, parts, &lo, &hi);
      kiln_rows_dot_vector(b, g->k, a, g->k, &out, lo, hi, work, dt, ct);
    }
  } else {
    /* C(m, 1) = op(A) . b(k): b is contiguous whether or not trans_b; C is a contiguous column; one bias for all. */
    const MatvecOut out = {c, g->alpha, g->accumulate, g->bias, 0};
    if (!g->trans_a) {
      split_range(g->m, 4, part, parts, &lo, &hi);
      kiln_rows_dot_vector(a, g->k, b, g->k, &out, lo, hi, work, dt, ct);
    } else {
      split_range(g->m, 16, part, parts, &lo, &hi);
      kiln_vector_times_rows(a, g->m, b, g->k, &out, lo, hi, work, dt, ct);
    }
  }
}

/* Part `part` of `parts` of batch item i. */
KILN_INLINE void matmul_item_part(const MatmulArgs* g, int i, int part, int parts, const Scratch* s, int dt) {
  const int ct = c_dtype(g, dt);
  const void* a = mm_at(g->a, (size_t)i * g->stride_a, dt);
  const void* b = mm_at(g->b, (size_t)i * g->stride_b, dt);
  void* c = mm_at_mut(g->c, (size_t)i * g->stride_c, ct);
  /* A 16-bit vector operand is converted into Bp first, so it must fit there. */
  if ((g->m == 1 || g->n == 1) && g->k > 0 && (dt == MM_F32 || g->k <= BP_FLOATS)) {
    matvec_part(g, a, b, c, part, parts, s->bp, dt, ct);
    return;
  }
  int m0, m1, n0, n1;
  kiln_gemm_grid(g->m, g->n, g->k, part, parts, &m0, &m1, &n0, &n1);
  gemm_rect_any(g, a, b, c, m0, m1, n0, n1, s, dt);
}

/* Thread `thread`'s share of the scratch block. */
KILN_INLINE Scratch thread_scratch(const MatmulArgs* g, int thread) {
  uint8_t* base = g->scratch + (size_t)thread * g->scratch_stride;
  float* f = (float*)base;
  const Scratch s = {(v128_t*)base, f + AP_FLOATS, f + AP_FLOATS + BP_FLOATS, f + AP_FLOATS + BP_FLOATS + TILE_FLOATS};
  return s;
}

void kiln_gemm_rect(const MatmulArgs* g, int m0, int m1, int n0, int n1, int thread, int dt) {
  const Scratch s = thread_scratch(g, thread);
  gemm_rect_any(g, g->a, g->b, g->c, m0, m1, n0, n1, &s, dt);
}

void kiln_gemm_row(const MatmulArgs* g, int row, int n0, int n1, int thread, int dt) {
  const Scratch s = thread_scratch(g, thread);
  /* A 16-bit row of A is converted into Bp first, so it must fit there. */
  if (g->trans_a || g->bias || (dt != MM_F32 && g->k > BP_FLOATS)) {
    kiln_gemm_rect(g, row, row + 1, n0, n1, thread, dt);
    return;
  }
  const int ct = c_dtype(g, dt);
  const void* a = mm_at(g->a, (size_t)row * g->k, dt);
  const MatvecOut out = {mm_at_mut(g->c, (size_t)row * g->n, ct), g->alpha, g->accumulate, NULL, 1};
  if (g->trans_b) kiln_rows_dot_vector(g->b, g->k, a, g->k, &out, n0, n1, s.bp, dt, ct);
  else kiln_vector_times_rows(g->b, g->n, a, g->k, &out, n0, n1, s.bp, dt, ct);
}

void kiln_gemm_part(const MatmulArgs* g, int part, int parts, int thread, int dt) {
  const Scratch s = thread_scratch(g, thread);
  matmul_item_part(g, 0, part, parts, &s, dt);
}

KILN_INLINE void matmul_entry(const MatmulArgs* g, int thread, int nthreads, int dt) {
  const Scratch s = thread_scratch(g, thread);
  const int batch = g->batch;

  /* Whole batch items per thread when that balances well; else every thread takes part of every item. */
  if (nthreads > 1 && batch >= nthreads && (batch % nthreads == 0 || batch >= 4 * nthreads)) {
    int b0, b1;
    split_range(batch, 1, thread, nthreads, &b0, &b1);
    for (int i = b0; i < b1; i++) matmul_item_part(g, i, 0, 1, &s, dt);
    return;
  }
  for (int i = 0; i < batch; i++) matmul_item_part(g, i, thread, nthreads, &s, dt);
}

KILN_EXPORT(kiln_matmul_f32)
void kiln_matmul_f32(const MatmulArgs* g, int thread, int nthreads) { matmul_entry(g, thread, nthreads, MM_F32); }

KILN_EXPORT(kiln_matmul_bf16)
void kiln_matmul_bf16(const MatmulArgs* g, int thread, int nthreads) { matmul_entry(g, thread, nthreads, MM_BF16); }

KILN_EXPORT(kiln_matmul_f16)
void kiln_matmul_f16(const MatmulArgs* g, int thread, int nthreads) { matmul_entry(g, thread, nthreads, MM_F16); }
