// One instruction set's kernels table (IsaKernels in matmul_call.h) from the templates of
// nest_gemm.h and nest_matvec.h: the matmul split into parts as csrc/matmul.c splits it,
// the register-only FMA ceiling, the conversions for tests, attention (nest_attention.h), GELU (nest_activation.h), the norms (nest_norm.h) and cross-entropy (nest_cross_entropy.h). Included once by each
// gemm_<isa>.cc after its simd_<isa>.h; ISA_KERNELS(V) then defines the table.
#ifndef KILN_NATIVE_NEST_ENTRY_H
#define KILN_NATIVE_NEST_ENTRY_H

#include <stdlib.h>

#include "nest_activation.h"
#include "nest_attention.h"
#include "nest_cross_entropy.h"
#include "nest_gemm.h"
#include "nest_norm.h"
#include "nest_matvec.h"

namespace kiln_native {
namespace {

/* A 16-bit vector operand longer than this takes the GEMM, as in csrc/matmul.c (KC * NC of its relaxed build). */
constexpr int64_t kMatvecHalfMaxK = 256 * 2052;

/*
 * This thread's buffers, freed when the thread ends: Ap and Bp when it loads the kernels
 * (prepare_thread), Cp on the first call with a 16-bit C that needs it, `work` as long as
 * the longest matrix-vector operand so far.
 */
template <class V>
struct ThreadScratch {
  Scratch s{};
  ~ThreadScratch() {
    free(s.ap);
    free(s.bp);
    free(s.cp);
    free(s.work);
  }
  /* n floats, 64-byte aligned, their pages touched now rather than inside the first call. */
  static float* floats(int64_t n) {
    const size_t bytes = (size_t)((n * 4 + 63) / 64 * 64);
    void* p = aligned_alloc(64, bytes);
    if (!p) abort();  // a few MiB per thread: nothing sensible to do without them
    memset(p, 0, bytes);
    return (float*)p;
  }
  const Scratch& get(int64_t work_floats, bool cp) {
    using B = Blocks<V>;
    if (!s.ap) {
      s.ap = floats((int64_t)B::MC * KC);
      s.bp = floats((int64_t)KC * B::NC);
    }
    if (cp && !s.cp) s.cp = floats((int64_t)B::MB * B::NC);
    if (s.work_floats < work_floats) {
      free(s.work);
      s.work = floats(work_floats);
      s.work_floats = work_floats;
    }
    return s;
  }
};

template <class V>
static const Scratch& thread_scratch(int64_t work_floats, bool cp = false) {
  static thread_local ThreadScratch<V> scratch;
  return scratch.get(work_floats, cp);
}

/* Whether every batch item's product is a matrix-vector one (csrc/matmul.c's takes_matvec). */
static inline bool takes_matvec(const MatmulCall& g) {
  return (g.m == 1 || g.n == 1) && g.k > 0 && (g.dt == kF32 || g.k <= kMatvecHalfMaxK) && !(g.m == 1 && g.trans_a && g.lda != 1);
}

/* Part `part` of `parts` of one output row or column. */
template <class V, int DT, int CT>
static void matvec_part(const MatmulCall& g, const uint8_t* a, const uint8_t* b, uint8_t* c, int part, int parts) {
  int lo, hi;
  if (g.m == 1) { /* C(1, n) = a(k) . op(B); a is contiguous whether or not trans_a */
    const MatvecOut out{c, g.alpha, g.accumulate, g.bias, 1};
    if (!g.trans_b) {
      split_range(g.n, 16, part, parts, &lo, &hi);
      vector_times_rows<V, DT, CT>(b, g.n, a, g.k, out, lo, hi);
    } else {
      split_range(g.n, 4, part, parts, &lo, &hi);
      rows_dot_vector<V, DT, CT>(b, g.k, a, g.k, out, lo, hi, thread_scratch<V>(g.k).work);
    }
  } else { /* C(m, 1) = op(A) . b(k); b is contiguous whether or not trans_b; one bias for all */
    const MatvecOut out{c, g.alpha, g.accumulate, g.bias, 0};
    if (!g.trans_a) {
      split_range(g.m, 4, part, parts, &lo, &hi);
      rows_dot_vector<V, DT, CT>(a, g.lda, b, g.k, out, lo, hi, thread_scratch<V>(g.k).work);
    } else {
      split_range(g.m, 16, part, parts, &lo, &hi);
      vector_times_rows<V, DT, CT>(a, g.lda, b, g.k, out, lo, hi);
    }
  }
}

/* Part `part` of `parts` of batch item i: a rectangle of the grid for `parts`, or a share of its output row or column. */
template <class V, int DT, int CT>
static void item_part(const MatmulCall& g, int64_t i, int part, int parts) {
  const uint8_t* a = g.a + i * g.stride_a * element_bytes<DT>();
  const uint8_t* b = g.b + i * g.stride_b * element_bytes<DT>();
  uint8_t* c = g.c + i * g.stride_c * element_bytes<CT>();
  if (takes_matvec(g)) {
    matvec_part<V, DT, CT>(g, a, b, c, part, parts);
    return;
  }
  int m0, m1, n0, n1;
  gemm_grid<V>(g.m, g.n, g.k, part, parts, &m0, &m1, &n0, &n1);
  gemm_rect<V, DT, CT>(g, a, b, c, m0, m1, n0, n1, thread_scratch<V>(0, CT != kF32 && g.k > KC));
}

/*
 * Tiles of C per thread when threads share batch items: a thread that runs late or slow
 * (another process on its core, a vCPU the hypervisor took) leaves its tiles to the
 * others. Each tile packs its own rows of A and columns of B, so more tiles cost more packing.
 */
constexpr int kTilesPerPart = 2;

template <class V, int DT, int CT>
static void matmul_typed(const MatmulCall& g, int part, int parts) {
  if (parts == 1) {
    for (int i = 0; i < g.batch; i++) item_part<V, DT, CT>(g, i, 0, 1);
    return;
  }
  /* Whole batch items when there are enough to go round, drawn by whichever threads run. */
  if (g.batch >= parts && (g.batch % parts == 0 || g.batch >= 4 * parts)) {
    for (uint32_t i; (i = __atomic_fetch_add(g.tickets, 1u, __ATOMIC_RELAXED)) < (uint32_t)g.batch;) item_part<V, DT, CT>(g, i, 0, 1);
    return;
  }
  if (takes_matvec(g)) { /* memory-bound: a fixed share each */
    for (int i = 0; i < g.batch; i++) item_part<V, DT, CT>(g, i, part, parts);
    return;
  }
  /* Else tiles of every item, item by item, drawn from the same counter. */
  const uint32_t tiles = (uint32_t)(kTilesPerPart * parts), total = tiles * (uint32_t)g.batch;
  for (uint32_t t; (t = __atomic_fetch_add(g.tickets, 1u, __ATOMIC_RELAXED)) < total;) item_part<V, DT, CT>(g, t / tiles, (int)(t % tiles), (int)tiles);
}

template <class V>
static void matmul(const MatmulCall& g, int part, int parts) {
  if (g.dt == kF32) matmul_typed<V, kF32, kF32>(g, part, parts);
  else if (g.dt == kBf16 && g.ct == kF32) matmul_typed<V, kBf16, kF32>(g, part, parts);
  else if (g.dt == kBf16) matmul_typed<V, kBf16, kBf16>(g, part, parts);
  else if (g.ct == kF32) matmul_typed<V, kF16, kF32>(g, part, parts);
  else matmul_typed<V, kF16, kF16>(g, part, parts);
}

/* The register-only FMA loop: V::CHAINS independent chains (two pipes of four cycles' latency need eight). */
template <class V>
static float ceiling(int64_t iterations) {
  constexpr int kCeilingChains = V::CHAINS;
  const typename V::vec x = V::splat(0.999999f), y = V::splat(1e-6f);
  typename V::vec acc[kCeilingChains];
  for (int j = 0; j < kCeilingChains; j++) acc[j] = V::splat((float)j);
  for (int64_t i = 0; i < iterations; i++) {
#pragma GCC unroll 16
    for (int j = 0; j < kCeilingChains; j++) acc[j] = V::fma(acc[j], x, y);
  }
  typename V::vec sum = acc[0];
  for (int j = 1; j < kCeilingChains; j++) sum = V::add(sum, acc[j]);
  float lanes[V::L];
  V::store(lanes, sum);
  float total = 0.0f;
  for (int l = 0; l < V::L; l++) total += lanes[l];
  return total;
}

template <class V>
static void widen(const uint16_t* in, float* out, int64_t n, int32_t dt) {
  for (int64_t i = 0; i < n; i += V::L) {
    const int w = (int)imin64(V::L, n - i);
    const typename V::vec x = dt == kBf16 ? vload_n<V, kBf16>((const uint8_t*)in, i, w) : vload_n<V, kF16>((const uint8_t*)in, i, w);
    vstore_n<V, kF32>((uint8_t*)out, i, x, w);
  }
}

template <class V>
static void narrow(const float* in, uint16_t* out, int64_t n, int32_t dt) {
  for (int64_t i = 0; i < n; i += V::L) {
    const int w = (int)imin64(V::L, n - i);
    const typename V::vec x = vload_n<V, kF32>((const uint8_t*)in, i, w);
    if (dt == kBf16) vstore_n<V, kBf16>((uint8_t*)out, i, x, w);
    else vstore_n<V, kF16>((uint8_t*)out, i, x, w);
  }
}

/* The calling thread's loop-nest buffers, allocated now (each pool thread, when it loads the kernels). */
template <class V>
static void prepare_thread() {
  thread_scratch<V>(0);
}

template <class V>
static IsaKernels isa_kernels() {
  return IsaKernels{V::name,   V::MR,       V::NRV * V::L, KC,       &matmul<V>, &ceiling<V>, (int64_t)V::CHAINS * V::L * 2,
                    &widen<V>, &narrow<V>, &prepare_thread<V>, &attention_forward<V>, &attention_backward<V>,
                    &gelu<V, false>, &gelu<V, true>, &norm_forward<V>, &norm_backward<V>, &cross_entropy<V>};
}

}  // namespace
}  // namespace kiln_native

#endif
