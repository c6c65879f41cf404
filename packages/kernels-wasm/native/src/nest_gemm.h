// The native GEMM loop nest on one instruction set's vectors V, for one rectangle of C
// (BLIS/Goto, as csrc/matmul.c):
//   jc over n in NC columns
//     ib over m in MB rows                 (16-bit C with k > KC only: bounds Cp)
//       pc over k in KC steps              pack B(pc:pc+KC, jc:jc+NC) into Bp   (L3)
//         ic over MB rows in MC steps      pack A(ic:ic+MC, pc:pc+KC) into Ap   (L2)
//           jr over NR-column slivers of Bp          (one sliver, KC x NR: L1 / L2)
//             ir over MR-row slivers of Ap
//               MR x NR register tile = Ap sliver @ Bp sliver, then the epilogue
// Each element of C is one fused multiply-add chain per k block (p in order from 0),
// then x = alpha * chain + what came before (first block: C when accumulating, then the
// bias; later blocks: the f32 partial sum, C itself when C is f32, else Cp). That is the
// summation of csrc/matmul.c with the same KC, whatever the tile, rectangle or thread.
// A 16-bit C is rounded once, on the last k block.
#ifndef KILN_NATIVE_NEST_GEMM_H
#define KILN_NATIVE_NEST_GEMM_H

#include "nest_pack.h"

namespace kiln_native {
namespace {

/* k block: the same as csrc/matmul_pack.h's KC, so sums are split where the wasm kernel splits them. */
constexpr int KC = 256;

template <class V>
struct Blocks {
  static constexpr int MR = V::MR;
  static constexpr int NR = V::NRV * V::L;
  static constexpr int MC = (144 + MR - 1) / MR * MR;   // A block MC x KC: 144 KiB, in L2
  static constexpr int NC = (2048 + NR - 1) / NR * NR;  // B panel KC x NC: 2 MiB, in L3
  static constexpr int MB = 2 * MC;                     // rows of Cp (16-bit C, k > KC)
};

/* Per-thread buffers of the loop nest (sized by Blocks<V>), and `work` for matrix-vector operands. */
struct Scratch {
  float* ap;
  float* bp;
  float* cp;
  float* work;
  int64_t work_floats;
};

/* acc(MR x NR) += `steps` k steps of an Ap sliver (MR floats a step) times a Bp sliver (NR floats a step): FMA chains in k order. */
template <class V>
static inline __attribute__((always_inline)) void tile_steps(int steps, const float* __restrict ap, const float* __restrict bp,
                                                             typename V::vec (&acc)[V::MR][V::NRV]) {
  constexpr int MR = V::MR, NRV = V::NRV, NR = V::NRV * V::L;
  for (int p = 0; p < steps; p++) {
    typename V::vec b[NRV];
#pragma GCC unroll 4
    for (int v = 0; v < NRV; v++) b[v] = V::load(bp + v * V::L);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      const typename V::vec a = V::splat(ap[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NRV; v++) acc[r][v] = V::fma(a, b[v], acc[r][v]);
    }
    ap += MR;
    bp += NR;
  }
}

/* The last k steps of a tile, during which the lines its epilogue touches are fetched (prefetch_tile). */
constexpr int kTailSteps = 48;

/* Where a tile's running sum comes from (`in`, f32, nullptr on the first k block) and goes (`out`, nullptr: C). */
struct TileIo {
  const float* in;
  int64_t ld_in;
  float* out;
  int64_t ld_out;
};

/*
 * One vector of a tile's row (n of its lanes inside C): x = alpha * acc, plus on the first
 * k block (io.in == nullptr) C when accumulating and then the bias, else the partial sum
 * io.in; into io.out, or C (rounded once to CT). Nothing past the n lanes is touched.
 */
template <class V, int DT, int CT>
static inline __attribute__((always_inline)) void epilogue_vector(typename V::vec acc, int n, typename V::vec alpha, const float* in,
                                                                  float* out, uint8_t* c, int64_t at, bool accumulate,
                                                                  const uint8_t* bias, int64_t bias_at) {
  typename V::vec x = V::mul(acc, alpha);
  if (in) {
    x = V::add(x, n >= V::L ? V::load(in) : V::load_n(in, n));
  } else {
    if (accumulate) x = V::add(x, vload_n<V, CT>(c, at, n));
    if (bias) x = V::add(x, vload_n<V, DT>(bias, bias_at, n));
  }
  if (out) {
    if (n >= V::L) V::store(out, x);
    else V::store_n(out, x, n);
  } else {
    vstore_n<V, CT>(c, at, x, n);
  }
}

/*
 * The tile's rows x cols through epilogue_vector. WHOLE (rows == MR, cols == NR, nearly
 * every tile) unrolls the loops so the accumulators stay in registers.
 */
template <class V, int DT, int CT, bool WHOLE>
static inline __attribute__((always_inline)) void tile_epilogue(const typename V::vec (&acc)[V::MR][V::NRV], int rows, int cols, float alpha,
                                                                const TileIo& io, uint8_t* c, int64_t c_at, int64_t ldc, bool accumulate,
                                                                const uint8_t* bias, int64_t bias_at) {
  const typename V::vec alpha_v = V::splat(alpha);
  const int row_count = WHOLE ? V::MR : rows;
#pragma GCC unroll 16
  for (int r = 0; r < row_count; r++) {
#pragma GCC unroll 4
    for (int v = 0; v < V::NRV; v++) {
      const int n = WHOLE ? V::L : cols - v * V::L;
      if (n <= 0) break;
      epilogue_vector<V, DT, CT>(acc[r][v], n, alpha_v, io.in ? io.in + r * io.ld_in + v * V::L : nullptr,
                                 io.out ? io.out + r * io.ld_out + v * V::L : nullptr, c, c_at + r * ldc + v * V::L, accumulate, bias,
                                 bias_at + v * V::L);
    }
  }
}

/*
 * Asks for the cache lines the tile's epilogue reads and writes (C's rows, or Cp's) while
 * the tile's last k steps run: a row of C is a fresh line from L3 or memory on every k
 * block, and asked for earlier the streams of A and B would evict it from L1 again.
 */
template <class V, int CT>
static inline void prefetch_tile(const uint8_t* c, int64_t c_at, int64_t ldc, int rows, const TileIo& io) {
  constexpr int64_t row_bytes = (int64_t)V::NRV * V::L * (CT == kF32 ? 4 : 2);
  for (int r = 0; r < rows; r++) {
    const char* row = io.out ? (const char*)(io.out + r * io.ld_out) : (const char*)(c + (c_at + r * ldc) * (CT == kF32 ? 4 : 2));
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + b, 0, 3);
    if (io.in && io.in != io.out && CT != kF32) {
      const char* part = (const char*)(io.in + r * io.ld_in);
      for (int64_t b = 0; b < (int64_t)V::NRV * V::L * 4; b += 64) __builtin_prefetch(part + b, 0, 3);
    }
  }
}

/*
 * C(m0:m1, n0:n1) of one matrix (a, b, c its first elements; batch and strides are the
 * caller's) by the loop nest above.
 */
template <class V, int DT, int CT>
static void gemm_rect(const MatmulCall& g, const uint8_t* a, const uint8_t* b, uint8_t* c, int m0, int m1, int n0, int n1,
                      const Scratch& s) {
  using B = Blocks<V>;
  const int k = g.k;
  const int64_t ldc = g.n, lda = g.lda, ldb = g.trans_b ? g.k : g.n;
  if (m1 <= m0 || n1 <= n0) return;

  if (k == 0) { /* no products: only the epilogue, as csrc/matmul.c writes it */
    for (int i = m0; i < m1; i++)
      for (int j = n0; j < n1; j++) {
        const float x = g.accumulate ? load1<V, CT>(c, i * ldc + j) : 0.0f;
        store1<V, CT>(c, i * ldc + j, x + (g.bias ? load1<V, DT>(g.bias, j) : 0.0f));
      }
    return;
  }

  const bool use_cp = CT != kF32 && k > KC;
  const int row_block = use_cp ? B::MB : m1 - m0;
  typename V::vec acc[V::MR][V::NRV];
  for (int jc = n0; jc < n1; jc += B::NC) {
    const int nc = imin(B::NC, n1 - jc);
    for (int ib = m0; ib < m1; ib += row_block) {
      const int ie = imin(m1, ib + row_block);
      for (int pc = 0; pc < k; pc += KC) {
        const int kc = imin(KC, k - pc);
        const bool first = pc == 0, last = pc + kc >= k;
        pack_b<V, DT>(b, ldb, g.trans_b, pc, kc, jc, nc, s.bp);
        for (int ic = ib; ic < ie; ic += B::MC) {
          const int mc = imin(B::MC, ie - ic);
          pack_a<V, DT>(a, lda, g.trans_a, ic, mc, pc, kc, s.ap);
          for (int jr = 0; jr < nc; jr += B::NR) {
            const int cols = imin(B::NR, nc - jr);
            for (int ir = 0; ir < mc; ir += B::MR) {
              const int rows = imin(B::MR, mc - ir);
              const int64_t c_at = (int64_t)(ic + ir) * ldc + jc + jr;
              TileIo io;
              if (CT == kF32) {
                float* ct = (float*)c + c_at;
                io = {first ? nullptr : ct, ldc, nullptr, 0};
              } else {
                float* cpt = s.cp + (int64_t)(ic - ib + ir) * B::NC + jr;
                io = {first ? nullptr : cpt, B::NC, last ? nullptr : cpt, B::NC};
              }
              /* acc = Ap sliver @ Bp sliver, the epilogue's lines asked for before the last steps. */
              const float* ap = s.ap + (int64_t)ir * kc;
              const float* bp = s.bp + (int64_t)jr * kc;
              const int head = kc > kTailSteps ? kc - kTailSteps : 0;
#pragma GCC unroll 16
              for (int r = 0; r < V::MR; r++)
#pragma GCC unroll 4
                for (int v = 0; v < V::NRV; v++) acc[r][v] = V::zero();
              tile_steps<V>(head, ap, bp, acc);
              prefetch_tile<V, CT>(c, c_at, ldc, rows, io);
              tile_steps<V>(kc - head, ap + (int64_t)head * B::MR, bp + (int64_t)head * B::NR, acc);
              const uint8_t* bias = first ? g.bias : nullptr;
              if (rows == B::MR && cols == B::NR) tile_epilogue<V, DT, CT, true>(acc, rows, cols, g.alpha, io, c, c_at, ldc, g.accumulate, bias, jc + jr);
              else tile_epilogue<V, DT, CT, false>(acc, rows, cols, g.alpha, io, c, c_at, ldc, g.accumulate, bias, jc + jr);
            }
          }
        }
      }
    }
  }
}

/* [lo, hi) of `total` split into `parts` near-equal runs of whole `unit`s. */
static inline void split_range(int total, int unit, int part, int parts, int* lo, int* hi) {
  const int64_t units = (total + unit - 1) / unit;
  *lo = imin(total, (int)(units * part / parts) * unit);
  *hi = imin(total, (int)(units * (part + 1) / parts) * unit);
}

/* The rectangle of C (m x n) that part `part` of `parts` takes: the tm x tn grid with the least work for its largest part. */
template <class V>
static void gemm_grid(int m, int n, int k, int part, int parts, int* m0, int* m1, int* n0, int* n1) {
  using B = Blocks<V>;
  const int64_t mb = (m + B::MR - 1) / B::MR, nb = (n + B::NR - 1) / B::NR;
  int64_t best = INT64_MAX;
  int tm = 1;
  for (int t = 1; t <= parts; t++) {
    if (parts % t) continue;
    const int64_t rows = (mb + t - 1) / t * B::MR, cols = (nb + parts / t - 1) / (parts / t) * B::NR;
    const int64_t cost = rows * cols * k + 8 * (rows + cols) * (int64_t)k;
    if (cost < best) best = cost, tm = t;
  }
  const int tn = parts / tm;
  split_range(m, B::MR, part / tn, tm, m0, m1);
  split_range(n, B::NR, part % tn, tn, n0, n1);
}

}  // namespace
}  // namespace kiln_native

#endif
