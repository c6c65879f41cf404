/*
 * The register tile product, the per-thread scratch and the 16-bit path of the
 * matmul loop nest (csrc/matmul.c): A, B and bias in bf16 or f16 (dt), C in dt
 * or f32 (ct), partial sums in f32. Included by matmul.c, which instantiates
 * it with a 16-bit C, and by matmul_wide.c, which instantiates it with an f32
 * C: each translation unit compiles only its own instances, so the 16-bit-C
 * code is what it would be without the f32-C one.
 */
#ifndef KILN_MATMUL_HALF_H
#define KILN_MATMUL_HALF_H

#include "kiln_simd.h"
#include "matmul_dtype.h"
#include "matmul_gemm.h"
#include "matmul_pack.h"

/* Thread t's part of MatmulArgs.scratch (layout in matmul.c). */
typedef struct {
  float* ap;
  float* bp;
  float* tile;
  float* cp;
} Scratch;

/* acc(MR x NR) = Ap sliver (kc x MR) ^T @ Bp sliver (kc x NR). */
KILN_INLINE void tile_product(int kc, const float* restrict ap, const float* restrict bp, v128_t acc[MR][NRV]) {
  for (int r = 0; r < MR; r++)
    for (int v = 0; v < NRV; v++) acc[r][v] = wasm_f32x4_splat(0.0f);

#pragma clang loop unroll_count(MATMUL_UNROLL)
  for (int p = 0; p < kc; p++) {
    v128_t bv[NRV];
    for (int v = 0; v < NRV; v++) bv[v] = wasm_v128_load(bp + 4 * v);
    for (int r = 0; r < MR; r++) {
      const v128_t av = wasm_v128_load32_splat(ap + r);
      for (int v = 0; v < NRV; v++) acc[r][v] = KILN_MADD(acc[r][v], av, bv[v]);
    }
    ap += MR;
    bp += NR;
  }
}

/* Where a 16-bit tile's running sum comes from and goes to. */
#define FROM_C 0  /* first k block: (accumulate ? C : 0) + bias, each read in its own dtype */
#define FROM_CP 1 /* later k blocks: the f32 partial sum in Cp */
#define TO_CP 0   /* more k blocks follow: f32 into Cp (padded: whole tiles always fit) */
#define TO_C 1    /* last k block: rounded once into C */

/*
 * 16-bit A, B and bias (dtype dt), C in ct (dt or KILN_DT_F32):
 * x = alpha * acc + (from == FROM_CP ? Cp : (accumulate ? C : 0) + bias), then x
 * goes to Cp or to C(rows x cols), rounded when ct is 16-bit. C and bias are
 * touched only inside the tile's rows and cols.
 */
KILN_INLINE void register_tile_half(int kc, const float* restrict ap, const float* restrict bp, void* c, int ldc,
                                    float* cp, int rows, int cols, float alpha, int from, int to, int accumulate,
                                    const uint16_t* bias, int dt, int ct) {
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
        if (accumulate) x = wasm_f32x4_add(x, kiln_load4(c, at, ct));
        if (bias) x = wasm_f32x4_add(x, kiln_load4(bias, 4 * v, dt));
      } else if (n > 0) {
        if (accumulate) x = wasm_f32x4_add(x, mm_load_n(c, at, n, ct));
        if (bias) x = wasm_f32x4_add(x, mm_load_n(bias, 4 * v, n, dt));
      }
      if (to == TO_CP) wasm_v128_store(cp + r * NC + 4 * v, x);
      else if (n == 4) kiln_store4(c, at, x, ct);
      else if (n > 0) mm_store_n(c, at, x, n, ct);
    }
  }
}

/* The register tiles of one packed MC x NC block (16-bit A and B), with `from` and `to` fixed. */
KILN_INLINE void half_block(const MatmulArgs* g, void* c, int ldc, int ic, int ib, int jc, int mc, int nc, int kc,
                            const uint16_t* bias, int from, int to, const Scratch* s, int dt, int ct) {
  for (int jr = 0; jr < nc; jr += NR) {
    const int cols = kiln_min(NR, nc - jr);
    const float* bsliver = s->bp + jr * kc;
    const uint16_t* bias_j = bias ? bias + jc + jr : NULL;
    for (int ir = 0; ir < mc; ir += MR) {
      const int rows = kiln_min(MR, mc - ir);
      void* ctile = ct == KILN_DT_F32 ? (void*)((float*)c + (size_t)(ic + ir) * ldc + jc + jr)
                                  : (void*)((uint16_t*)c + (size_t)(ic + ir) * ldc + jc + jr);
      float* cptile = s->cp + (size_t)(ic - ib + ir) * NC + jr;
      register_tile_half(kc, s->ap + ir * kc, bsliver, ctile, ldc, cptile, rows, cols, g->alpha, from, to,
                         g->accumulate, bias_j, dt, ct);
    }
  }
}

/*
 * C(m0:m1, n0:n1) of one batch item, A and B in a 16-bit dtype dt, C in ct (dt or
 * KILN_DT_F32): partial sums stay in f32 (Cp) until the last k block.
 */
KILN_INLINE void gemm_rect_half(const MatmulArgs* g, const uint16_t* a, const uint16_t* b, void* c, int m0,
                                int m1, int n0, int n1, const Scratch* s, int dt, int ct) {
  const int k = g->k, ldc = g->n;
  const int lda = g->lda;
  const int ldb = g->trans_b ? g->k : g->n;
  const uint16_t* bias = (const uint16_t*)g->bias;
  if (m1 <= m0 || n1 <= n0) return;

  if (k == 0) {
    for (int i = m0; i < m1; i++)
      for (int j = n0; j < n1; j++) {
        const size_t at = (size_t)i * ldc + j;
        const float x = (g->accumulate ? kiln_load1(c, at, ct) : 0.0f) + (bias ? kiln_load1(bias, j, dt) : 0.0f);
        kiln_store1(c, at, x, ct);
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
          if (first && last) half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, bias, FROM_C, TO_C, s, dt, ct);
          else if (first) half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, bias, FROM_C, TO_CP, s, dt, ct);
          else if (last) half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, NULL, FROM_CP, TO_C, s, dt, ct);
          else half_block(g, c, ldc, ic, ib, jc, mc, nc, kc, NULL, FROM_CP, TO_CP, s, dt, ct);
        }
      }
    }
  }
}

/* matmul_wide.c: C(m0:m1, n0:n1) with 16-bit A and B (bf16, f16) and an f32 C. */
void kiln_gemm_rect_bf16_c_f32(const MatmulArgs* g, const uint16_t* a, const uint16_t* b, void* c, int m0, int m1,
                               int n0, int n1, const Scratch* s);
void kiln_gemm_rect_f16_c_f32(const MatmulArgs* g, const uint16_t* a, const uint16_t* b, void* c, int m0, int m1,
                              int n0, int n1, const Scratch* s);

#endif
