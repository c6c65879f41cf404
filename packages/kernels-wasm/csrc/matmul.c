/*
 * matmul: batched GEMM with f32, bf16 or f16 storage.
 *
 *   for each batch item i:  C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
 *
 * Row-major throughout. op(A) is (m, k): A stored (m, k), or (k, m) when
 * trans_a, its rows lda apart (k, or m when trans_a, or more: a matrix inside a
 * wider one). op(B) is (k, n): B stored (k, n) with
 * ldb = n, or (n, k) with ldb = k when trans_b. C is (m, n), ldc = n.
 * Batch item i starts at i * stride_{a,b,c} elements (a stride of 0
 * broadcasts one matrix). bias (length n, optional) is added to every row.
 *
 * Storage: A, B and bias are in the entry's dtype (kiln_matmul_f32, _bf16,
 * _f16; dtypes and conversions in kiln_storage.h); C is too, or f32 with
 * 16-bit A and B when MatmulArgs.c_f32 is set (parameter gradients kept in
 * f32). Products and sums are f32; a 16-bit C is rounded once, to nearest
 * even, when its final value is stored; an f32 C is read and written without
 * any rounding.
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
 * Threads: with f32 storage, the threads work on each batch item together
 * (gemm_shared: B panels packed once into shared buffers, pieces of B and blocks
 * of C drawn from one counter by whichever threads run, no barrier). 16-bit
 * storage gives each thread a rectangle of C, packed into its own scratch with no
 * synchronisation. Both draw whole batch items from a counter when the batch is
 * large enough to go round the threads.
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

/* Per-thread scratch: Ap (MC x KC), Bp (KC x NC), one spare register tile, Cp (MB x NC). */
#define AP_FLOATS (MC * KC)
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
KILN_INLINE void register_tile(int kc, const float* restrict ap, const float* restrict bp, float* c, int ldc,
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

/*
 * Columns [j0, j1) of the packed panel `bp` (kc deep, starting at column jc of C)
 * times the packed rows ic..ic+mc of Ap, into C: the jr and ir loops of the nest.
 */
KILN_INLINE void panel_block(const MatmulArgs* g, const Scratch* s, const float* bp, float* c, int ic, int mc, int kc,
                             int jc, int j0, int j1, int keep_c, const float* bias) {
  const int ldc = g->n;
  for (int jr = j0; jr < j1; jr += NR) {
    const int cols = kiln_min(NR, j1 - jr);
    const float* bsliver = bp + jr * kc;
    const float* bias_j = bias ? bias + jr : NULL;
    for (int ir = 0; ir < mc; ir += MR) {
      const int rows = kiln_min(MR, mc - ir);
      float* ctile = c + (size_t)(ic + ir) * ldc + jc + jr;
      register_tile(kc, s->ap + ir * kc, bsliver, ctile, ldc, rows, cols, g->alpha, keep_c, bias_j, s->tile);
    }
  }
}

/* ---- one rectangle of one batch item ---------------------------------- */

/* C(m0:m1, n0:n1) of one batch item in f32, the whole loop nest above. */
__attribute__((noinline)) static void gemm_rect(const MatmulArgs* g, const float* a, const float* b, float* c, int m0, int m1, int n0, int n1,
                      const Scratch* s) {
  const int k = g->k, ldc = g->n;
  const int lda = g->lda;
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
      pack_b(b, ldb, g->trans_b, pc, kc, jc, nc, s->bp, KILN_DT_F32);
      /* The first k block applies accumulate and bias; later ones add on. */
      const int keep_c = pc > 0 || g->accumulate;
      const float* bias = pc == 0 && g_bias ? g_bias + jc : NULL;
      for (int ic = m0; ic < m1; ic += MC) {
        const int mc = kiln_min(MC, m1 - ic);
        pack_a(a, lda, g->trans_a, ic, mc, pc, kc, s->ap, KILN_DT_F32);
        panel_block(g, s, s->bp, c, ic, mc, kc, jc, 0, nc, keep_c, bias);
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
GEMM_RECT_HALF(gemm_rect_bf16, KILN_DT_BF16, KILN_DT_BF16)
GEMM_RECT_HALF(gemm_rect_f16, KILN_DT_F16, KILN_DT_F16)

/* C's dtype: the entry's, or f32 for 16-bit A and B when c_f32 is set. */
KILN_INLINE int c_dtype(const MatmulArgs* g, int dt) { return g->c_f32 ? KILN_DT_F32 : dt; }

/* C(m0:m1, n0:n1) of one batch item (a, b, c its first elements) by the function for dt and C's dtype. */
static void gemm_rect_any(const MatmulArgs* g, const void* a, const void* b, void* c, int m0, int m1, int n0, int n1,
                          const Scratch* s, int dt) {
  const int wide = g->c_f32;
  if (dt == KILN_DT_F32) gemm_rect(g, (const float*)a, (const float*)b, (float*)c, m0, m1, n0, n1, s);
  else if (dt == KILN_DT_BF16) (wide ? kiln_gemm_rect_bf16_c_f32 : gemm_rect_bf16)(g, a, b, c, m0, m1, n0, n1, s);
  else (wide ? kiln_gemm_rect_f16_c_f32 : gemm_rect_f16)(g, a, b, c, m0, m1, n0, n1, s);
}

/* [lo, hi) of `units` split into `parts` near-equal ranges, scaled by `unit`. */
KILN_INLINE void split_range(int total, int unit, int part, int parts, int* lo, int* hi) {
  const int units = (total + unit - 1) / unit;
  *lo = kiln_min(total, (int)((int64_t)units * part / parts) * unit);
  *hi = kiln_min(total, (int)((int64_t)units * (part + 1) / parts) * unit);
}

/* Thread `thread`'s share of the scratch block. */
KILN_INLINE Scratch thread_scratch(const MatmulArgs* g, int thread) {
  uint8_t* base = g->scratch + (size_t)thread * g->scratch_stride;
  float* f = (float*)base;
  const Scratch s = {f, f + AP_FLOATS, f + AP_FLOATS + BP_FLOATS, f + AP_FLOATS + BP_FLOATS + TILE_FLOATS};
  return s;
}

/* ---- all threads on every batch item, B packed once ------------------- */

/*
 * f32 with several threads: one sequence of work items, drawn from a counter by
 * whichever threads are running, covers every panel (a KC x NC piece of B) of every
 * batch item in order. Panel s contributes its packing pieces (PACK_SLIVERS slivers
 * each, packed into shared buffer s & 1), then its blocks of C (MC rows x a run of
 * columns; a thread packs the A rows of a block itself). What an item needs is
 * counted, not met at a barrier:
 *   a piece of panel s   every piece of panels < s packed (so `packed` counts exactly),
 *                        every block of panels < s - 1 done (the last readers of its buffer)
 *   a block of panel s   every piece of panels <= s packed,
 *                        every block of panels < s done (C's k blocks in order)
 * Each item waits only on items drawn before it, so the earliest unfinished one never
 * waits. A thread that is not running (a busy core, a worker not yet awake) holds no
 * item and delays no one: the others take the rest, and a thread that joins late walks
 * the sequence up to the item it draws. Every element of C sees the same k blocks in
 * the same order as in gemm_rect, so results are bit-identical to it, whichever
 * thread takes which item and however many take part.
 *
 * The counters (tickets, packed, done, sleepers) live in MatmulArgs, zeroed by the
 * host before each call.
 */
typedef struct {
  uint32_t first;     /* the panel's first item: its pieces, then its blocks */
  uint32_t pieces, blocks;
  uint32_t packed_before;    /* pieces of the panels before this one */
  uint32_t done_before;      /* blocks of the panels before this one */
  uint32_t done_before_prev; /* blocks of the panels before the previous one */
  uint32_t index;            /* panels before this one */
  int item, jc, pc, nc, kc, w, cblocks;
} Panel;

/* Slivers of B per packing piece (NR columns x KC rows each). */
#define PACK_SLIVERS 4

/* Columns per block: the whole panel, or runs of it (whole slivers, >= 128 columns) until there are 8 blocks per thread. */
KILN_INLINE int block_columns(int mblocks, int nc, int nthreads) {
  int chunks = 1;
  while (mblocks * chunks < 8 * nthreads && (nc + chunks) / (chunks + 1) >= 128) chunks++;
  const int w = (nc + chunks - 1) / chunks;
  return (w + NR - 1) / NR * NR;
}

KILN_INLINE void panel_shape(const MatmulArgs* g, Panel* p, int mblocks, int nthreads) {
  p->nc = kiln_min(NC, g->n - p->jc);
  p->kc = kiln_min(KC, g->k - p->pc);
  p->w = block_columns(mblocks, p->nc, nthreads);
  p->cblocks = (p->nc + p->w - 1) / p->w;
  p->pieces = (uint32_t)((p->nc + PACK_SLIVERS * NR - 1) / (PACK_SLIVERS * NR));
  p->blocks = (uint32_t)(mblocks * p->cblocks);
}

/* Moves `p` forward to the panel holding item t; 0 when t is past the last panel. */
KILN_INLINE int panel_of(const MatmulArgs* g, Panel* p, uint32_t t, int mblocks, int nthreads) {
  while (t - p->first >= p->pieces + p->blocks) {
    p->first += p->pieces + p->blocks;
    p->done_before_prev = p->done_before;
    p->packed_before += p->pieces;
    p->done_before += p->blocks;
    p->index++;
    p->pc += KC;
    if (p->pc >= g->k) {
      p->pc = 0;
      p->jc += NC;
      if (p->jc >= g->n) p->jc = 0, p->item++;
    }
    if (p->item >= g->batch) return 0;
    panel_shape(g, p, mblocks, nthreads);
  }
  return 1;
}

/*
 * A thread waiting for a count polls it WAIT_POLLS times (a few hundred microseconds:
 * on an idle machine a wait lasts one block of C at most, and polling answers
 * fastest), then sleeps in memory.atomic.wait32 until the thread that counts wakes
 * it, giving up its core to whoever needs it. (Polls halved after each wait that ended
 * asleep, down to 64, were tried: 2-3% slower training of models/nano-start.yaml with a
 * little load from other processes. With more load the host's pool soon stops waking
 * its workers, ContentionGate in src/contention-gate.ts, and these waits go with them.)
 * A sleep lasts SLEEP_NS at most; those that run out are counted (kiln_wait_timeouts):
 * the host's pool takes them as time a call lost to a thread that was not running.
 */
#define WAIT_POLLS 524288u
#define SLEEP_NS 200000ll
static uint32_t wait_timeouts;

KILN_EXPORT(kiln_wait_timeouts)
uint32_t kiln_wait_timeouts(void) { return __atomic_load_n(&wait_timeouts, __ATOMIC_RELAXED); }

/* Returns once *counter >= target (counter only grows). */
static void wait_for_count(uint32_t* counter, uint32_t target, uint32_t* sleepers) {
  for (uint32_t i = 0; i < WAIT_POLLS; i++)
    if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return;
  for (;;) {
    __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
    const uint32_t seen = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
#ifdef __wasm_atomics__
    if (seen < target && __builtin_wasm_memory_atomic_wait32((int32_t*)counter, (int32_t)seen, SLEEP_NS) == 2)
      __atomic_fetch_add(&wait_timeouts, 1, __ATOMIC_RELAXED);
#endif
    __atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
    if (seen >= target || __atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return;
  }
}

/* One more item counted; wakes the threads asleep in wait_for_count, if any. */
static void count_one(uint32_t* counter, uint32_t* sleepers) {
  __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);
#ifdef __wasm_atomics__
  if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST)) __builtin_wasm_memory_atomic_notify((int32_t*)counter, UINT32_MAX);
#else
  (void)sleepers; /* one thread: no one sleeps */
#endif
}

__attribute__((noinline)) static void gemm_shared(const MatmulArgs* g, const Scratch* s, int nthreads) {
  const int m = g->m;
  const int lda = g->lda;
  const int ldb = g->trans_b ? g->k : g->n;
  const float* g_bias = (const float*)g->bias;
  MatmulArgs* shared = (MatmulArgs*)g;
  uint32_t* tickets = &shared->tickets;
  uint32_t* packed = &shared->packed;
  uint32_t* done = &shared->done;
  uint32_t* sleepers = &shared->sleepers;
  /* The two panel buffers: threads 0 and 1's own Bp (unused by their owners on this path). */
  float* const panels[2] = {thread_scratch(g, 0).bp, thread_scratch(g, 1).bp};
  const int mblocks = (m + MC - 1) / MC;

  Panel p = {0};
  panel_shape(g, &p, mblocks, nthreads);
  uint32_t ready_panel = UINT32_MAX; /* the panel whose blocks this thread knows it may compute */
  uint32_t ap_panel = UINT32_MAX;    /* the panel and row block this thread's Ap holds */
  int ap_block = -1;
  for (;;) {
    const uint32_t t = __atomic_fetch_add(tickets, 1, __ATOMIC_RELAXED);
    if (!panel_of(g, &p, t, mblocks, nthreads)) break;
    const float* a = (const float*)g->a + (size_t)p.item * g->stride_a;
    const float* b = (const float*)g->b + (size_t)p.item * g->stride_b;
    float* c = (float*)g->c + (size_t)p.item * g->stride_c;
    float* bp = panels[p.index & 1];
    const uint32_t i = t - p.first;
    if (i < p.pieces) {
      wait_for_count(packed, p.packed_before, sleepers);
      wait_for_count(done, p.done_before_prev, sleepers);
      const int lo = (int)i * PACK_SLIVERS * NR, cols = kiln_min(PACK_SLIVERS * NR, p.nc - lo);
      pack_b(b, ldb, g->trans_b, p.pc, p.kc, p.jc + lo, cols, bp + lo * p.kc, KILN_DT_F32);
      count_one(packed, sleepers);
      continue;
    }
    if (ready_panel != p.index) { /* once per panel: the counts only grow */
      wait_for_count(packed, p.packed_before + p.pieces, sleepers);
      wait_for_count(done, p.done_before, sleepers);
      ready_panel = p.index;
    }
    const int blk = (int)(i - p.pieces);
    const int ib = blk / p.cblocks, cb = blk % p.cblocks;
    const int ic = ib * MC, mc = kiln_min(MC, m - ic);
    if (ap_panel != p.index || ap_block != ib) {
      pack_a(a, lda, g->trans_a, ic, mc, p.pc, p.kc, s->ap, KILN_DT_F32);
      ap_panel = p.index, ap_block = ib;
    }
    const int keep_c = p.pc > 0 || g->accumulate;
    const float* bias = p.pc == 0 && g_bias ? g_bias + p.jc : NULL;
    panel_block(g, s, bp, c, ic, mc, p.kc, p.jc, cb * p.w, kiln_min(p.nc, (cb + 1) * p.w), keep_c, bias);
    count_one(done, sleepers);
  }
}

/* ---- splitting the work among threads --------------------------------- */

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
      kiln_rows_dot_vector(a, g->lda, b, g->k, &out, lo, hi, work, dt, ct);
    } else {
      split_range(g->m, 16, part, parts, &lo, &hi);
      kiln_vector_times_rows(a, g->lda, b, g->k, &out, lo, hi, work, dt, ct);
    }
  }
}

/* Whether the call's products are matrix-vector ones (no packing; matmul_vector.c), for every batch item alike. */
KILN_INLINE int takes_matvec(const MatmulArgs* g, int dt) {
  /* A 16-bit vector operand is converted into Bp first, so it must fit there; a one-row op(A) read down a column of a wider A takes the GEMM. */
  return (g->m == 1 || g->n == 1) && g->k > 0 && (dt == KILN_DT_F32 || g->k <= BP_FLOATS) && !(g->m == 1 && g->trans_a && g->lda != 1);
}

/* Part `part` of `parts` of batch item i. */
KILN_INLINE void matmul_item_part(const MatmulArgs* g, int i, int part, int parts, const Scratch* s, int dt) {
  const int ct = c_dtype(g, dt);
  const void* a = mm_at(g->a, (size_t)i * g->stride_a, dt);
  const void* b = mm_at(g->b, (size_t)i * g->stride_b, dt);
  void* c = mm_at_mut(g->c, (size_t)i * g->stride_c, ct);
  if (takes_matvec(g, dt)) {
    matvec_part(g, a, b, c, part, parts, s->bp, dt, ct);
    return;
  }
  int m0, m1, n0, n1;
  kiln_gemm_grid(g->m, g->n, g->k, part, parts, &m0, &m1, &n0, &n1);
  gemm_rect_any(g, a, b, c, m0, m1, n0, n1, s, dt);
}

void kiln_gemm_rect(const MatmulArgs* g, int m0, int m1, int n0, int n1, int thread, int dt) {
  const Scratch s = thread_scratch(g, thread);
  gemm_rect_any(g, g->a, g->b, g->c, m0, m1, n0, n1, &s, dt);
}

void kiln_gemm_row(const MatmulArgs* g, int row, int n0, int n1, int thread, int dt) {
  const Scratch s = thread_scratch(g, thread);
  /* A 16-bit row of A is converted into Bp first, so it must fit there. */
  if (g->trans_a || g->bias || (dt != KILN_DT_F32 && g->k > BP_FLOATS)) {
    kiln_gemm_rect(g, row, row + 1, n0, n1, thread, dt);
    return;
  }
  const int ct = c_dtype(g, dt);
  const void* a = mm_at(g->a, (size_t)row * g->lda, dt);
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

  /* Whole batch items when there are enough to go round, drawn from a counter by whichever threads run. */
  if (nthreads > 1 && batch >= nthreads && (batch % nthreads == 0 || batch >= 4 * nthreads)) {
    uint32_t* tickets = &((MatmulArgs*)g)->tickets;
    for (uint32_t i; (i = __atomic_fetch_add(tickets, 1, __ATOMIC_RELAXED)) < (uint32_t)batch;) matmul_item_part(g, (int)i, 0, 1, &s, dt);
    return;
  }
  /* Else every thread takes part of every item: f32 through the shared panels, 16-bit as a fixed rectangle each. */
  if (nthreads > 1 && dt == KILN_DT_F32 && g->k > 0 && !takes_matvec(g, dt)) {
    gemm_shared(g, &s, nthreads);
    return;
  }
  for (int i = 0; i < batch; i++) matmul_item_part(g, i, thread, nthreads, &s, dt);
}

KILN_EXPORT(kiln_matmul_f32)
void kiln_matmul_f32(const MatmulArgs* g, int thread, int nthreads) { matmul_entry(g, thread, nthreads, KILN_DT_F32); }

KILN_EXPORT(kiln_matmul_bf16)
void kiln_matmul_bf16(const MatmulArgs* g, int thread, int nthreads) { matmul_entry(g, thread, nthreads, KILN_DT_BF16); }

KILN_EXPORT(kiln_matmul_f16)
void kiln_matmul_f16(const MatmulArgs* g, int thread, int nthreads) { matmul_entry(g, thread, nthreads, KILN_DT_F16); }
