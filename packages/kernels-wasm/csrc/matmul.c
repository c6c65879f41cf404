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
 * Storage: A, B, bias and C are all in the entry's dtype (kiln_matmul_f32,
 * _bf16, _f16; see matmul_dtype.h). Products and sums are f32; a 16-bit C is
 * rounded once, to nearest even, when its final value is stored.
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
 * Packed layouts (zero padded to whole slivers so the register tile never
 * needs a bounds check):
 *   Ap: sliver s holds rows s*MR..s*MR+MR-1, stored p-major: Ap[s][p][r]
 *   Bp: sliver s holds cols s*NR..s*NR+NR-1, stored p-major: Bp[s][p][c]
 *   Cp: MB x NC f32, row-major (16-bit dtypes only)
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
#ifndef MATMUL_MB_BLOCKS
#define MATMUL_MB_BLOCKS 2     /* MC blocks per MB row block of the 16-bit path */
#endif

#define MR MATMUL_MR
#define NRV MATMUL_NRV
#define NR MATMUL_NR
#define KC MATMUL_KC
#define MC ((MATMUL_MC + MR - 1) / MR * MR)
#define NC ((MATMUL_NC + NR - 1) / NR * NR)
#define MB (MC * MATMUL_MB_BLOCKS)

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

/* ---- packing ---------------------------------------------------------- */

/* Lane l of x in all four lanes. */
#define SPLAT_LANE(x, l) wasm_i32x4_shuffle((x), (x), (l), (l), (l), (l))

/*
 * Ap[s][p][r] = splat(op(A)(i0 + s*MR + r, p0 + p)), zero past row mc.
 * Each value is stored as a whole f32x4 so the register tile reads it with a
 * plain v128.load (V8 folds its offset into the address; it does not for
 * load32_splat, and the extra address registers spill the tile).
 */
KILN_INLINE void pack_a(const void* a, int lda, int trans_a, int i0, int mc, int p0, int kc, v128_t* ap, int dt) {
  for (int s = 0; s < mc; s += MR) {
    const int rows = kiln_min(MR, mc - s);
    v128_t* dst = ap + s * kc;
    if (trans_a) {
      /* A stored (k, m): the MR values of one p are contiguous. */
      if (dt == MM_F32) {
        const float* src = (const float*)a + (size_t)p0 * lda + i0 + s;
        for (int p = 0; p < kc; p++, src += lda, dst += MR) {
          int r = 0;
          for (; r < rows; r++) dst[r] = wasm_f32x4_splat(src[r]);
          for (; r < MR; r++) dst[r] = wasm_f32x4_splat(0.0f);
        }
      } else {
        /* Four values at once where they lie inside this row of A (lda == m). */
        const int wide = MR <= 4 && rows == MR && i0 + s + 4 <= lda;
        size_t at = (size_t)p0 * lda + i0 + s;
        for (int p = 0; p < kc; p++, at += lda, dst += MR) {
          const v128_t x = wide ? mm_load4(a, at, dt) : mm_load_n(a, at, kiln_min(rows, 4), dt);
          dst[0] = SPLAT_LANE(x, 0);
          if (MR > 1) dst[1] = SPLAT_LANE(x, 1);
          if (MR > 2) dst[2] = SPLAT_LANE(x, 2);
          if (MR > 3) dst[3] = SPLAT_LANE(x, 3);
          for (int r = 4; r < MR; r++) dst[r] = wasm_f32x4_splat(r < rows ? mm_load1(a, at + r, dt) : 0.0f);
        }
      }
    } else {
      /* A stored (m, k): walk each row contiguously, write with stride MR. */
      for (int r = 0; r < rows; r++) {
        v128_t* d = dst + r;
        if (dt == MM_F32) {
          const float* src = (const float*)a + (size_t)(i0 + s + r) * lda + p0;
          for (int p = 0; p < kc; p++) d[p * MR] = wasm_f32x4_splat(src[p]);
        } else {
          const size_t row = (size_t)(i0 + s + r) * lda + p0;
          int p = 0;
          for (; p + 4 <= kc; p += 4) {
            const v128_t x = mm_load4(a, row + p, dt);
            d[p * MR] = SPLAT_LANE(x, 0);
            d[(p + 1) * MR] = SPLAT_LANE(x, 1);
            d[(p + 2) * MR] = SPLAT_LANE(x, 2);
            d[(p + 3) * MR] = SPLAT_LANE(x, 3);
          }
          for (; p < kc; p++) d[p * MR] = wasm_f32x4_splat(mm_load1(a, row + p, dt));
        }
      }
      for (int r = rows; r < MR; r++) {
        v128_t* d = dst + r;
        for (int p = 0; p < kc; p++) d[p * MR] = wasm_f32x4_splat(0.0f);
      }
    }
  }
}

/* Four rows of 4 lanes in, four columns out (in place). */
KILN_INLINE void transpose4(v128_t* r0, v128_t* r1, v128_t* r2, v128_t* r3) {
  const v128_t t0 = wasm_i32x4_shuffle(*r0, *r1, 0, 4, 1, 5);
  const v128_t t1 = wasm_i32x4_shuffle(*r2, *r3, 0, 4, 1, 5);
  const v128_t t2 = wasm_i32x4_shuffle(*r0, *r1, 2, 6, 3, 7);
  const v128_t t3 = wasm_i32x4_shuffle(*r2, *r3, 2, 6, 3, 7);
  *r0 = wasm_i32x4_shuffle(t0, t1, 0, 1, 4, 5);
  *r1 = wasm_i32x4_shuffle(t0, t1, 2, 3, 6, 7);
  *r2 = wasm_i32x4_shuffle(t2, t3, 0, 1, 4, 5);
  *r3 = wasm_i32x4_shuffle(t2, t3, 2, 3, 6, 7);
}

/*
 * Columns c..c+3 of one sliver of a transposed B, of which the first `real`
 * exist (the rest are zero). Column j of op(B) is the contiguous row j of the
 * stored (n, k) matrix, so four of them are read 4 p at a time and 4x4 blocks
 * transposed in registers.
 */
KILN_INLINE void pack_b_columns4(const void* b, int ldb, int p0, int kc, int j, int real, float* dst, int dt) {
  const size_t at0 = (size_t)j * ldb + p0, at1 = at0 + ldb, at2 = at1 + ldb, at3 = at2 + ldb;
  float* d = dst;
  if (real >= 4) {
    int p = 0;
    for (; p + 4 <= kc; p += 4, d += 4 * NR) {
      v128_t r0 = mm_load4(b, at0 + p, dt), r1 = mm_load4(b, at1 + p, dt);
      v128_t r2 = mm_load4(b, at2 + p, dt), r3 = mm_load4(b, at3 + p, dt);
      transpose4(&r0, &r1, &r2, &r3);
      wasm_v128_store(d, r0);
      wasm_v128_store(d + NR, r1);
      wasm_v128_store(d + 2 * NR, r2);
      wasm_v128_store(d + 3 * NR, r3);
    }
    for (; p < kc; p++, d += NR) {
      d[0] = mm_load1(b, at0 + p, dt);
      d[1] = mm_load1(b, at1 + p, dt);
      d[2] = mm_load1(b, at2 + p, dt);
      d[3] = mm_load1(b, at3 + p, dt);
    }
  } else {
    for (int p = 0; p < kc; p++, d += NR) {
      d[0] = real > 0 ? mm_load1(b, at0 + p, dt) : 0.0f;
      d[1] = real > 1 ? mm_load1(b, at1 + p, dt) : 0.0f;
      d[2] = real > 2 ? mm_load1(b, at2 + p, dt) : 0.0f;
      d[3] = 0.0f;
    }
  }
}

/* Bp[s][p][c] = op(B)(p0 + p, j0 + s*NR + c), zero past column nc. */
KILN_INLINE void pack_b(const void* b, int ldb, int trans_b, int p0, int kc, int j0, int nc, float* bp, int dt) {
  for (int s = 0; s < nc; s += NR) {
    const int cols = kiln_min(NR, nc - s);
    float* dst = bp + s * kc;
    if (!trans_b) {
      /* B stored (k, n): the NR values of one p are contiguous. */
      size_t at = (size_t)p0 * ldb + j0 + s;
      if (cols == NR) {
        for (int p = 0; p < kc; p++, at += ldb, dst += NR) {
          for (int v = 0; v < NRV; v++) wasm_v128_store(dst + 4 * v, mm_load4(b, at + 4 * v, dt));
        }
      } else if (dt == MM_F32) {
        const float* src = (const float*)b + at;
        for (int p = 0; p < kc; p++, src += ldb, dst += NR) {
          int c = 0;
          for (; c < cols; c++) dst[c] = src[c];
          for (; c < NR; c++) dst[c] = 0.0f;
        }
      } else {
        for (int p = 0; p < kc; p++, at += ldb, dst += NR) {
          for (int v = 0; v < NRV; v++) {
            const int n = cols - 4 * v;
            wasm_v128_store(dst + 4 * v, n > 0 ? mm_load_n(b, at + 4 * v, kiln_min(n, 4), dt) : wasm_f32x4_splat(0.0f));
          }
        }
      }
    } else {
      /* B stored (n, k): four columns of op(B) at a time, transposed in registers. */
      for (int c = 0; c < NR; c += 4) pack_b_columns4(b, ldb, p0, kc, j0 + s + c, cols - c, dst + c, dt);
    }
  }
}

/* ---- register tile ---------------------------------------------------- */

/* acc(MR x NR) = Ap sliver (kc x MR) ^T @ Bp sliver (kc x NR). */
KILN_INLINE void tile_product(int kc, const v128_t* restrict ap, const float* restrict bp, v128_t acc[MR][NRV]) {
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
}

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

/* Where a 16-bit tile's running sum comes from and goes to. */
#define FROM_C 0  /* first k block: (accumulate ? C : 0) + bias, read in the storage dtype */
#define FROM_CP 1 /* later k blocks: the f32 partial sum in Cp */
#define TO_CP 0   /* more k blocks follow: f32 into Cp (padded: whole tiles always fit) */
#define TO_C 1    /* last k block: rounded once into C */

/*
 * 16-bit storage: x = alpha * acc + (from == FROM_CP ? Cp : (accumulate ? C : 0) + bias),
 * then x goes to Cp or, rounded, to C(rows x cols). C and bias are touched only
 * inside the tile's rows and cols.
 */
KILN_INLINE void register_tile_half(int kc, const v128_t* restrict ap, const float* restrict bp, uint16_t* c, int ldc,
                                    float* cp, int rows, int cols, float alpha, int from, int to, int accumulate,
                                    const uint16_t* bias, int dt) {
  v128_t acc[MR][NRV];
  tile_product(kc, ap, bp, acc);

  const v128_t alpha_v = wasm_f32x4_splat(alpha);
  const int whole = rows == MR && cols == NR;
  for (int r = 0; r < MR; r++) {
    const int row_in = r < rows;
    for (int v = 0; v < NRV; v++) {
      const int n = whole ? 4 : kiln_max(0, kiln_min(4, cols - 4 * v)) * row_in;
      const size_t at = (size_t)r * ldc + 4 * v;
      v128_t x = wasm_f32x4_mul(acc[r][v], alpha_v);
      if (from == FROM_CP) {
        x = wasm_f32x4_add(x, wasm_v128_load(cp + r * NC + 4 * v));
      } else if (n == 4) {
        if (accumulate) x = wasm_f32x4_add(x, mm_load4(c, at, dt));
        if (bias) x = wasm_f32x4_add(x, mm_load4(bias, 4 * v, dt));
      } else if (n > 0) {
        if (accumulate) x = wasm_f32x4_add(x, mm_load_n(c, at, n, dt));
        if (bias) x = wasm_f32x4_add(x, mm_load_n(bias, 4 * v, n, dt));
      }
      if (to == TO_CP) wasm_v128_store(cp + r * NC + 4 * v, x);
      else if (n == 4) mm_store4(c, at, x, dt);
      else if (n > 0) mm_store_n(c, at, x, n, dt);
    }
  }
}

/* ---- one rectangle of one batch item ---------------------------------- */

typedef struct {
  v128_t* ap;
  float* bp;
  float* tile;
  float* cp;
} Scratch;

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

/* The register tiles of one packed MC x NC block (16-bit storage), with `from` and `to` fixed. */
KILN_INLINE void half_block(const MatmulArgs* g, uint16_t* c, int ldc, int ic, int ib, int jc, int mc, int nc, int kc,
                            const uint16_t* bias, int from, int to, const Scratch* s, int dt) {
  for (int jr = 0; jr < nc; jr += NR) {
    const int cols = kiln_min(NR, nc - jr);
    const float* bsliver = s->bp + jr * kc;
    const uint16_t* bias_j = bias ? bias + jc + jr : NULL;
    for (int ir = 0; ir < mc; ir += MR) {
      const int rows = kiln_min(MR, mc - ir);
      uint16_t* ctile = c + (size_t)(ic + ir) * ldc + jc + jr;
      float* cptile = s->cp + (size_t)(ic - ib + ir) * NC + jr;
      register_tile_half(kc, s->ap + ir * kc, bsliver, ctile, ldc, cptile, rows, cols, g->alpha, from, to,
                         g->accumulate, bias_j, dt);
    }
  }
}

/* C(m0:m1, n0:n1) of one batch item in a 16-bit dtype: partial sums stay in f32 (Cp) until the last k block. */
KILN_INLINE void gemm_rect_half(const MatmulArgs* g, const uint16_t* a, const uint16_t* b, uint16_t* c, int m0,
                                int m1, int n0, int n1, const Scratch* s, int dt) {
  const int k = g->k, ldc = g->n;
  const int lda = g->trans_a ? g->m : g->k;
  const int ldb = g->trans_b ? g->k : g->n;
  const uint16_t* bias = (const uint16_t*)g->bias;
  if (m1 <= m0 || n1 <= n0) return;

  if (k == 0) {
    for (int i = m0; i < m1; i++)
      for (int j = n0; j < n1; j++) {
        const size_t at = (size_t)i * ldc + j;
        const float x = (g->accumulate ? mm_load1(c, at, dt) : 0.0f) + (bias ? mm_load1(bias, j, dt) : 0.0f);
        mm_store1(c, at, x, dt);
      }
    return;
  }

  /* One k block needs no Cp, so no row blocks either. */
  const int row_block = k > KC ? MB : m1 - m0;
  for (int jc = n0; jc < n1; jc += NC) {
    const int nc = kiln_min(NC, n1 - jc);
    for (int ib = m0; ib < m1; ib += row_block) {
      const int ie = kiln_min(m1, ib + row_block);
      for (int pc = 0; pc < k; pc += KC) {
        const int kc = kiln_min(KC, k - pc);
        const int first = pc == 0, last = pc + kc >= k;
        pack_b(b, ldb, g->trans_b, pc, kc, jc, nc, s->bp, dt);
        for (int ic = ib; ic < ie; ic += MC) {
          const int mc = kiln_min(MC, ie - ic);
          pack_a(a, lda, g->trans_a, ic, mc, pc, kc, s->ap, dt);
          if (first && last) half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, bias, FROM_C, TO_C, s, dt);
          else if (first) half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, bias, FROM_C, TO_CP, s, dt);
          else if (last) half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, NULL, FROM_CP, TO_C, s, dt);
          else half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, NULL, FROM_CP, TO_CP, s, dt);
        }
      }
    }
  }
}

/* One function per dtype: V8 compiles a smaller function into tighter code. */
__attribute__((noinline)) static void gemm_rect_bf16(const MatmulArgs* g, const uint16_t* a, const uint16_t* b,
                                                    uint16_t* c, int m0, int m1, int n0, int n1, const Scratch* s) {
  gemm_rect_half(g, a, b, c, m0, m1, n0, n1, s, MM_BF16);
}

__attribute__((noinline)) static void gemm_rect_f16(const MatmulArgs* g, const uint16_t* a, const uint16_t* b,
                                                   uint16_t* c, int m0, int m1, int n0, int n1, const Scratch* s) {
  gemm_rect_half(g, a, b, c, m0, m1, n0, n1, s, MM_F16);
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
                             float* work, int dt) {
  int lo, hi;
  if (g->m == 1) {
    /* C(1, n) = a(k) . op(B): a is contiguous whether or not trans_a; one bias per output. */
    const MatvecOut out = {c, g->alpha, g->accumulate, g->bias, 1};
    if (!g->trans_b) {
      split_range(g->n, 16, part, parts, &lo, &hi);
      kiln_vector_times_rows(b, g->n, a, g->k, &out, lo, hi, work, dt);
    } else {
      split_range(g->n, 4, part, parts, &lo, &hi);
      kiln_rows_dot_vector(b, g->k, a, g->k, &out, lo, hi, work, dt);
    }
  } else {
    /* C(m, 1) = op(A) . b(k): b is contiguous whether or not trans_b; C is a contiguous column; one bias for all. */
    const MatvecOut out = {c, g->alpha, g->accumulate, g->bias, 0};
    if (!g->trans_a) {
      split_range(g->m, 4, part, parts, &lo, &hi);
      kiln_rows_dot_vector(a, g->k, b, g->k, &out, lo, hi, work, dt);
    } else {
      split_range(g->m, 16, part, parts, &lo, &hi);
      kiln_vector_times_rows(a, g->m, b, g->k, &out, lo, hi, work, dt);
    }
  }
}

/* Part `part` of `parts` of batch item i. */
KILN_INLINE void matmul_item_part(const MatmulArgs* g, int i, int part, int parts, const Scratch* s, int dt) {
  const size_t esize = dt == MM_F32 ? 4 : 2;
  const uint8_t* a = (const uint8_t*)g->a + (size_t)i * g->stride_a * esize;
  const uint8_t* b = (const uint8_t*)g->b + (size_t)i * g->stride_b * esize;
  uint8_t* c = (uint8_t*)g->c + (size_t)i * g->stride_c * esize;
  /* A 16-bit vector operand is converted into Bp first, so it must fit there. */
  if ((g->m == 1 || g->n == 1) && g->k > 0 && (dt == MM_F32 || g->k <= BP_FLOATS)) {
    matvec_part(g, a, b, c, part, parts, s->bp, dt);
    return;
  }
  int m0, m1, n0, n1;
  kiln_gemm_grid(g->m, g->n, g->k, part, parts, &m0, &m1, &n0, &n1);
  if (dt == MM_F32) gemm_rect(g, (const float*)a, (const float*)b, (float*)c, m0, m1, n0, n1, s);
  else if (dt == MM_BF16) gemm_rect_bf16(g, (const uint16_t*)a, (const uint16_t*)b, (uint16_t*)c, m0, m1, n0, n1, s);
  else gemm_rect_f16(g, (const uint16_t*)a, (const uint16_t*)b, (uint16_t*)c, m0, m1, n0, n1, s);
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
  if (dt == MM_F32) gemm_rect(g, (const float*)g->a, (const float*)g->b, (float*)g->c, m0, m1, n0, n1, &s);
  else if (dt == MM_BF16) gemm_rect_bf16(g, (const uint16_t*)g->a, (const uint16_t*)g->b, (uint16_t*)g->c, m0, m1, n0, n1, &s);
  else gemm_rect_f16(g, (const uint16_t*)g->a, (const uint16_t*)g->b, (uint16_t*)g->c, m0, m1, n0, n1, &s);
}

void kiln_gemm_row(const MatmulArgs* g, int row, int n0, int n1, int thread, int dt) {
  const Scratch s = thread_scratch(g, thread);
  /* A 16-bit row of A is converted into Bp first, so it must fit there. */
  if (g->trans_a || g->bias || (dt != MM_F32 && g->k > BP_FLOATS)) {
    kiln_gemm_rect(g, row, row + 1, n0, n1, thread, dt);
    return;
  }
  const size_t esize = dt == MM_F32 ? 4 : 2;
  const uint8_t* a = (const uint8_t*)g->a + (size_t)row * g->k * esize;
  const MatvecOut out = {(uint8_t*)g->c + (size_t)row * g->n * esize, g->alpha, g->accumulate, NULL, 1};
  if (g->trans_b) kiln_rows_dot_vector(g->b, g->k, a, g->k, &out, n0, n1, s.bp, dt);
  else kiln_vector_times_rows(g->b, g->n, a, g->k, &out, n0, n1, s.bp, dt);
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
