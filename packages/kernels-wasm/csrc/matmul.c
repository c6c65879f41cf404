/*
 * matmul: batched f32 GEMM.
 *
 *   for each batch item i:  C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
 *
 * Row-major throughout. op(A) is (m, k): A stored (m, k) with lda = k, or
 * (k, m) with lda = m when trans_a. op(B) is (k, n): B stored (k, n) with
 * ldb = n, or (n, k) with ldb = k when trans_b. C is (m, n), ldc = n.
 * Batch item i starts at i * stride_{a,b,c} elements (a stride of 0
 * broadcasts one matrix). bias (length n, optional) is added to every row.
 *
 * Algorithm (the BLIS/Goto loop nest):
 *   jc over n in NC columns
 *     pc over k in KC steps           pack B(pc:pc+KC, jc:jc+NC) into Bp
 *       ic over m in MC rows          pack A(ic:ic+MC, pc:pc+KC) into Ap
 *         jr over NR-column slivers of Bp      (one sliver, KC x NR, stays in L1)
 *           ir over MR-row slivers of Ap       (the MC x KC block stays in L2)
 *             MR x NR register tile += Ap sliver @ Bp sliver
 *
 * Packed layouts (zero padded to whole slivers so the register tile never
 * needs a bounds check):
 *   Ap: sliver s holds rows s*MR..s*MR+MR-1, stored p-major: Ap[s][p][r]
 *   Bp: sliver s holds cols s*NR..s*NR+NR-1, stored p-major: Bp[s][p][c]
 *
 * Threads: each thread takes a rectangle of C (whole batch items when the
 * batch divides well among threads), packs its own A and B blocks into its
 * own scratch, and writes only its own rectangle, so no synchronisation is
 * needed inside the kernel.
 */
#include "kiln_simd.h"
#include "matmul_vector.h"

/*
 * Register tile MR x (4 * NRV). V8 gives wasm 15 of the 16 xmm registers and
 * loads every operand of a k step before the first multiply-add, so the tile
 * must hold MR*NRV accumulators + NRV B vectors + MR A splats (+1 product
 * for mul+add) in 15 registers: 3x12 for fused madd, 4x8 for mul+add.
 * Unrolling the k loop makes V8 hoist two steps of loads and spill.
 */
#if defined(KILN_RELAXED_SIMD) && KILN_RELAXED_SIMD
#define DEFAULT_MR 3
#define DEFAULT_NRV 3
#else
#define DEFAULT_MR 4
#define DEFAULT_NRV 2
#endif
#ifndef MATMUL_MR
#define MATMUL_MR DEFAULT_MR   /* rows of the register tile */
#endif
#ifndef MATMUL_NRV
#define MATMUL_NRV DEFAULT_NRV /* f32x4 vectors per row of the register tile */
#endif
#define MATMUL_NR (MATMUL_NRV * 4)
#ifndef MATMUL_UNROLL
#define MATMUL_UNROLL 1        /* k steps per iteration of the register tile loop */
#endif
#ifndef MATMUL_KC
#define MATMUL_KC 256
#endif
#ifndef MATMUL_MC
#define MATMUL_MC 96
#endif
#ifndef MATMUL_NC
#define MATMUL_NC 2048
#endif

#define MR MATMUL_MR
#define NRV MATMUL_NRV
#define NR MATMUL_NR
#define KC MATMUL_KC
#define MC ((MATMUL_MC + MR - 1) / MR * MR)
#define NC ((MATMUL_NC + NR - 1) / NR * NR)

/* Host-written argument block; field order and sizes are mirrored in src/matmul-args.ts. */
typedef struct {
  int32_t m, n, k, batch;
  const float* a;
  const float* b;
  float* c;
  const float* bias;       /* NULL: no bias */
  int32_t stride_a, stride_b, stride_c;
  int32_t trans_a, trans_b, accumulate;
  float alpha;
  uint8_t* scratch;        /* thread t uses scratch + t * scratch_stride */
  uint32_t scratch_stride; /* bytes, at least kiln_matmul_scratch_bytes() */
} MatmulArgs;

/* Per-thread scratch: Ap (MC x KC, each value stored 4x), Bp (KC x NC), one spare register tile. */
#define AP_FLOATS (MC * KC * 4)
#define BP_FLOATS (KC * NC)
#define TILE_FLOATS (MR * NR)

KILN_EXPORT(kiln_matmul_scratch_bytes)
uint32_t kiln_matmul_scratch_bytes(void) {
  return (uint32_t)(AP_FLOATS + BP_FLOATS + TILE_FLOATS) * sizeof(float);
}

KILN_EXPORT(kiln_matmul_tile_shape)
uint32_t kiln_matmul_tile_shape(void) {
  /* MR | NR << 8 | KC << 16: reported by the host for diagnostics. */
  return (uint32_t)MR | ((uint32_t)NR << 8) | ((uint32_t)KC << 16);
}

/* ---- packing ---------------------------------------------------------- */

/*
 * Ap[s][p][r] = splat(op(A)(i0 + s*MR + r, p0 + p)), zero past row mc.
 * Each value is stored as a whole f32x4 so the register tile reads it with a
 * plain v128.load (V8 folds its offset into the address; it does not for
 * load32_splat, and the extra address registers spill the tile).
 */
static void pack_a(const float* a, int lda, int trans_a, int i0, int mc, int p0, int kc, v128_t* ap) {
  for (int s = 0; s < mc; s += MR) {
    const int rows = kiln_min(MR, mc - s);
    v128_t* dst = ap + s * kc;
    if (trans_a) {
      /* A stored (k, m): the MR values of one p are contiguous. */
      const float* src = a + (size_t)p0 * lda + i0 + s;
      for (int p = 0; p < kc; p++, src += lda, dst += MR) {
        int r = 0;
        for (; r < rows; r++) dst[r] = wasm_f32x4_splat(src[r]);
        for (; r < MR; r++) dst[r] = wasm_f32x4_splat(0.0f);
      }
    } else {
      /* A stored (m, k): walk each row contiguously, write with stride MR. */
      for (int r = 0; r < rows; r++) {
        const float* src = a + (size_t)(i0 + s + r) * lda + p0;
        v128_t* d = dst + r;
        for (int p = 0; p < kc; p++) d[p * MR] = wasm_f32x4_splat(src[p]);
      }
      for (int r = rows; r < MR; r++) {
        v128_t* d = dst + r;
        for (int p = 0; p < kc; p++) d[p * MR] = wasm_f32x4_splat(0.0f);
      }
    }
  }
}

/* Bp[s][p][c] = op(B)(p0 + p, j0 + s*NR + c), zero past column nc. */
static void pack_b(const float* b, int ldb, int trans_b, int p0, int kc, int j0, int nc, float* bp) {
  for (int s = 0; s < nc; s += NR) {
    const int cols = kiln_min(NR, nc - s);
    float* dst = bp + s * kc;
    if (!trans_b) {
      /* B stored (k, n): the NR values of one p are contiguous. */
      const float* src = b + (size_t)p0 * ldb + j0 + s;
      if (cols == NR) {
        for (int p = 0; p < kc; p++, src += ldb, dst += NR) {
          for (int v = 0; v < NRV; v++) wasm_v128_store(dst + 4 * v, wasm_v128_load(src + 4 * v));
        }
      } else {
        for (int p = 0; p < kc; p++, src += ldb, dst += NR) {
          int c = 0;
          for (; c < cols; c++) dst[c] = src[c];
          for (; c < NR; c++) dst[c] = 0.0f;
        }
      }
    } else {
      /* B stored (n, k): walk each column of op(B) contiguously. */
      for (int c = 0; c < cols; c++) {
        const float* src = b + (size_t)(j0 + s + c) * ldb + p0;
        float* d = dst + c;
        for (int p = 0; p < kc; p++) d[p * NR] = src[p];
      }
      for (int c = cols; c < NR; c++) {
        float* d = dst + c;
        for (int p = 0; p < kc; p++) d[p * NR] = 0.0f;
      }
    }
  }
}

/* ---- register tile ---------------------------------------------------- */

/*
 * acc(MR x NR) = Ap sliver (kc x MR) ^T @ Bp sliver (kc x NR), then
 *   C(rows x cols) = alpha * acc + (keep_c ? C : 0) + (bias ? bias[col] : 0).
 * Full tiles are written straight to C; edge tiles go through `tile`.
 */
KILN_INLINE void register_tile(int kc, const v128_t* restrict ap, const float* restrict bp, float* c, int ldc,
                               int rows, int cols, float alpha, int keep_c, const float* bias, float* tile) {
  v128_t acc[MR][NRV];
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NRV; v++) acc[r][v] = wasm_f32x4_splat(0.0f);

#pragma clang loop unroll_count(MATMUL_UNROLL)
  for (int p = 0; p < kc; p++) {
    v128_t bv[NRV];
    for (int v = 0; v < NRV; v++) bv[v] = wasm_v128_load(bp + 4 * v);
    for (int r = 0; r < MR; r++) {
      const v128_t av = ap[r];
      for (int v = 0; v < NRV; v++) acc[r][v] = KILN_MADD(acc[r][v], av, bv[v]);
    }
    ap += MR;
    bp += NR;
  }

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

typedef struct {
  v128_t* ap;
  float* bp;
  float* tile;
} Scratch;

/* C(m0:m1, n0:n1) of one batch item, the whole loop nest above. */
static void gemm_rect(const MatmulArgs* g, const float* a, const float* b, float* c, int m0, int m1, int n0, int n1,
                      const Scratch* s) {
  const int k = g->k, ldc = g->n;
  const int lda = g->trans_a ? g->m : g->k;
  const int ldb = g->trans_b ? g->k : g->n;
  if (m1 <= m0 || n1 <= n0) return;

  if (k == 0) { /* no products: only the epilogue */
    for (int i = m0; i < m1; i++)
      for (int j = n0; j < n1; j++) {
        float x = g->accumulate ? c[(size_t)i * ldc + j] : 0.0f;
        c[(size_t)i * ldc + j] = x + (g->bias ? g->bias[j] : 0.0f);
      }
    return;
  }

  for (int jc = n0; jc < n1; jc += NC) {
    const int nc = kiln_min(NC, n1 - jc);
    for (int pc = 0; pc < k; pc += KC) {
      const int kc = kiln_min(KC, k - pc);
      pack_b(b, ldb, g->trans_b, pc, kc, jc, nc, s->bp);
      /* The first k block applies accumulate and bias; later ones add on. */
      const int keep_c = pc > 0 || g->accumulate;
      const float* bias = pc == 0 && g->bias ? g->bias + jc : NULL;
      for (int ic = m0; ic < m1; ic += MC) {
        const int mc = kiln_min(MC, m1 - ic);
        pack_a(a, lda, g->trans_a, ic, mc, pc, kc, s->ap);
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

/* One output row or column: a matrix-vector product, no packing (matmul_vector.c). */
static void matvec_part(const MatmulArgs* g, const float* a, const float* b, float* c, int part, int parts) {
  int lo, hi;
  if (g->m == 1) {
    /* C(1, n) = a(k) . op(B): a is contiguous whether or not trans_a. */
    if (!g->trans_b) {
      split_range(g->n, 24, part, parts, &lo, &hi);
      kiln_vector_times_rows(b, g->n, a, g->k, c, lo, hi, g->alpha, g->accumulate, g->bias, 1);
    } else {
      split_range(g->n, 4, part, parts, &lo, &hi);
      kiln_rows_dot_vector(b, g->k, a, g->k, c, lo, hi, g->alpha, g->accumulate, g->bias, 1);
    }
  } else {
    /* C(m, 1) = op(A) . b(k): b is contiguous whether or not trans_b; C is a contiguous column. */
    if (!g->trans_a) {
      split_range(g->m, 4, part, parts, &lo, &hi);
      kiln_rows_dot_vector(a, g->k, b, g->k, c, lo, hi, g->alpha, g->accumulate, g->bias, 0);
    } else {
      split_range(g->m, 24, part, parts, &lo, &hi);
      kiln_vector_times_rows(a, g->m, b, g->k, c, lo, hi, g->alpha, g->accumulate, g->bias, 0);
    }
  }
}

/* Part `part` of `parts` of batch item i. */
static void matmul_item_part(const MatmulArgs* g, int i, int part, int parts, const Scratch* s) {
  const float* a = g->a + (size_t)i * g->stride_a;
  const float* b = g->b + (size_t)i * g->stride_b;
  float* c = g->c + (size_t)i * g->stride_c;
  if ((g->m == 1 || g->n == 1) && g->k > 0) {
    matvec_part(g, a, b, c, part, parts);
    return;
  }
  int tm;
  thread_grid(g->m, g->n, g->k, parts, &tm);
  const int tn = parts / tm;
  int m0, m1, n0, n1;
  split_range(g->m, MR, part / tn, tm, &m0, &m1);
  split_range(g->n, NR, part % tn, tn, &n0, &n1);
  gemm_rect(g, a, b, c, m0, m1, n0, n1, s);
}

KILN_EXPORT(kiln_matmul_f32)
void kiln_matmul_f32(const MatmulArgs* g, int thread, int nthreads) {
  uint8_t* base = g->scratch + (size_t)thread * g->scratch_stride;
  const Scratch s = {(v128_t*)base, (float*)base + AP_FLOATS, (float*)base + AP_FLOATS + BP_FLOATS};
  const int batch = g->batch;

  /* Whole batch items per thread when that balances well; else every thread takes part of every item. */
  if (nthreads > 1 && batch >= nthreads && (batch % nthreads == 0 || batch >= 4 * nthreads)) {
    int b0, b1;
    split_range(batch, 1, thread, nthreads, &b0, &b1);
    for (int i = b0; i < b1; i++) matmul_item_part(g, i, 0, 1, &s);
    return;
  }
  for (int i = 0; i < batch; i++) matmul_item_part(g, i, thread, nthreads, &s);
}
