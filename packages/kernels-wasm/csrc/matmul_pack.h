/*
 * The matmul loop nest's block sizes and its packing of A and B (csrc/matmul.c).
 *
 * Packed layouts (zero padded to whole slivers so the register tile never
 * needs a bounds check; 16-bit A and B are converted to f32 here):
 *   Ap: sliver s holds rows s*MR..s*MR+MR-1, stored p-major: Ap[s][p][r]
 *   Bp: sliver s holds cols s*NR..s*NR+NR-1, stored p-major: Bp[s][p][c]
 * Every function takes the dtype of A or B (KILN_DT_* in kiln_storage.h) as
 * a constant and inlines to that dtype's code.
 */
#ifndef KILN_MATMUL_PACK_H
#define KILN_MATMUL_PACK_H

#include "kiln_simd.h"
#include "matmul_dtype.h"

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

/* ---- packing ---------------------------------------------------------- */

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
 * Four k steps (p .. p+3) of the MR rows starting at element `at` (rows lda apart)
 * into 4 * MR floats in Ap's order: dst[q * MR + r] = row r, step p + q (MR = 3 or 4).
 */
KILN_INLINE void interleave_rows4(const void* a, size_t at, int lda, float* dst, int dt) {
  v128_t x0 = kiln_load4(a, at, dt), x1 = kiln_load4(a, at + lda, dt), x2 = kiln_load4(a, at + 2 * (size_t)lda, dt);
  if (MR == 4) {
    v128_t x3 = kiln_load4(a, at + 3 * (size_t)lda, dt);
    transpose4(&x0, &x1, &x2, &x3);
    wasm_v128_store(dst, x0);
    wasm_v128_store(dst + 4, x1);
    wasm_v128_store(dst + 8, x2);
    wasm_v128_store(dst + 12, x3);
    return;
  }
  /* x0 = a0..a3, x1 = b0..b3, x2 = c0..c3 -> [a0 b0 c0 a1] [b1 c1 a2 b2] [c2 a3 b3 c3] */
  const v128_t ab01 = wasm_i32x4_shuffle(x0, x1, 0, 4, 1, 5);
  const v128_t bc12 = wasm_i32x4_shuffle(x1, x2, 1, 5, 2, 6);
  const v128_t ab33 = wasm_i32x4_shuffle(x0, x1, 3, 7, 3, 7);
  wasm_v128_store(dst, wasm_i32x4_shuffle(ab01, x2, 0, 1, 4, 2));
  wasm_v128_store(dst + 4, wasm_i32x4_shuffle(bc12, x0, 0, 1, 6, 2));
  wasm_v128_store(dst + 8, wasm_i32x4_shuffle(x2, ab33, 2, 4, 5, 3));
}

/*
 * pack_a for A stored (k, m): stored row p0 + p holds the block's mc values
 * contiguously, so each row is read once, four slivers' worth (4 * MR values) per
 * group of vector loads, and scattered MR values to each sliver. With MR = 3 a sliver's
 * four-lane store also writes the next step's first value, which that step then
 * overwrites; the last step is stored value by value so nothing lands past the sliver.
 */
KILN_INLINE void pack_a_transposed(const void* a, int lda, int i0, int mc, int p0, int kc, float* ap, int dt) {
  const int whole = MR == 3 || MR == 4 ? mc / (4 * MR) * (4 * MR) : 0; /* rows taken four slivers at a time */
  for (int p = 0; p < kc; p++) {
    const size_t at = (size_t)(p0 + p) * lda + i0;
    int i = 0;
    if (p + 1 < kc) {
      for (; i < whole; i += 4 * MR) {
        float* d = ap + (size_t)i * kc + p * MR;
        const v128_t x0 = kiln_load4(a, at + i, dt), x1 = kiln_load4(a, at + i + 4, dt), x2 = kiln_load4(a, at + i + 8, dt);
        if (MR == 4) {
          wasm_v128_store(d, x0);
          wasm_v128_store(d + MR * kc, x1);
          wasm_v128_store(d + 2 * MR * kc, x2);
          wasm_v128_store(d + 3 * MR * kc, kiln_load4(a, at + i + 12, dt));
        } else {
          wasm_v128_store(d, x0);                                              /* values 0 1 2 (3) */
          wasm_v128_store(d + MR * kc, wasm_i32x4_shuffle(x0, x1, 3, 4, 5, 6));     /* 3 4 5 (6) */
          wasm_v128_store(d + 2 * MR * kc, wasm_i32x4_shuffle(x1, x2, 2, 3, 4, 5)); /* 6 7 8 (9) */
          wasm_v128_store(d + 3 * MR * kc, wasm_i32x4_shuffle(x2, x2, 1, 2, 3, 3)); /* 9 10 11 (11) */
        }
      }
    }
    for (; i < mc; i++) ap[(size_t)(i / MR * MR) * kc + p * MR + i % MR] = kiln_load1(a, at + i, dt);
    for (; i % MR; i++) ap[(size_t)(i / MR * MR) * kc + p * MR + i % MR] = 0.0f;
  }
}

/*
 * Ap[s][p][r] = op(A)(i0 + s*MR + r, p0 + p), zero past row mc: MR floats per
 * k step, which the register tile broadcasts one at a time (v128.load32_splat).
 */
KILN_INLINE void pack_a(const void* a, int lda, int trans_a, int i0, int mc, int p0, int kc, float* ap, int dt) {
  if (trans_a) {
    pack_a_transposed(a, lda, i0, mc, p0, kc, ap, dt);
    return;
  }
  for (int s = 0; s < mc; s += MR) {
    const int rows = kiln_min(MR, mc - s);
    float* dst = ap + s * kc;
    if (rows == MR && (MR == 3 || MR == 4)) {
      /* A stored (m, k), a whole sliver: four k steps of every row at a time, interleaved in registers. */
      const size_t row0 = (size_t)(i0 + s) * lda + p0;
      int p = 0;
      for (; p + 4 <= kc; p += 4, dst += 4 * MR) interleave_rows4(a, row0 + p, lda, dst, dt);
      for (; p < kc; p++, dst += MR)
        for (int r = 0; r < MR; r++) dst[r] = kiln_load1(a, row0 + (size_t)r * lda + p, dt);
    } else {
      /* A stored (m, k), the last rows: walk each row contiguously, write with stride MR. */
      for (int r = 0; r < rows; r++) {
        float* d = dst + r;
        const size_t row = (size_t)(i0 + s + r) * lda + p0;
        for (int p = 0; p < kc; p++) d[p * MR] = kiln_load1(a, row + p, dt);
      }
      for (int r = rows; r < MR; r++)
        for (int p = 0; p < kc; p++) dst[p * MR + r] = 0.0f;
    }
  }
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
      v128_t r0 = kiln_load4(b, at0 + p, dt), r1 = kiln_load4(b, at1 + p, dt);
      v128_t r2 = kiln_load4(b, at2 + p, dt), r3 = kiln_load4(b, at3 + p, dt);
      transpose4(&r0, &r1, &r2, &r3);
      wasm_v128_store(d, r0);
      wasm_v128_store(d + NR, r1);
      wasm_v128_store(d + 2 * NR, r2);
      wasm_v128_store(d + 3 * NR, r3);
    }
    for (; p < kc; p++, d += NR) {
      d[0] = kiln_load1(b, at0 + p, dt);
      d[1] = kiln_load1(b, at1 + p, dt);
      d[2] = kiln_load1(b, at2 + p, dt);
      d[3] = kiln_load1(b, at3 + p, dt);
    }
  } else {
    for (int p = 0; p < kc; p++, d += NR) {
      d[0] = real > 0 ? kiln_load1(b, at0 + p, dt) : 0.0f;
      d[1] = real > 1 ? kiln_load1(b, at1 + p, dt) : 0.0f;
      d[2] = real > 2 ? kiln_load1(b, at2 + p, dt) : 0.0f;
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
          for (int v = 0; v < NRV; v++) wasm_v128_store(dst + 4 * v, kiln_load4(b, at + 4 * v, dt));
        }
      } else if (dt == KILN_DT_F32) {
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

#endif
