/*
 * rope: rotary position embedding, "rotate half" pairing, forward and backward.
 *
 * x and out are (batch, seqLen, heads, headDim) in the storage dtype (f32, bf16
 * or f16) with token rows row_stride elements apart (a row's heads are contiguous,
 * head h at h * headDim). For the token at sequence index t, position
 * p = pos_offset + t (minus doc_starts[t] in packed rows), and i < half = headDim / 2:
 *   a_i = sign * p * inv_freq[i]          inv_freq[i] = theta^(-2i/headDim), scaled (f64, from the host: ropeInvFreq)
 *   out[i]        = x[i] cos a_i - x[i+half] sin a_i
 *   out[i+half]   = x[i+half] cos a_i + x[i] sin a_i
 * sign = +1 forward, -1 backward (the inverse rotation maps dOut to dX).
 *
 * Angles are formed and reduced in f64 (p * inv_freq, then minus k * pi/2 in three
 * exact parts), so positions in the millions keep f32 accuracy; cos and sin come
 * from f64 polynomials on [-pi/4, pi/4] (kiln_cos_sin in csrc/kiln_math.h) and are
 * rounded to f32 once per token and frequency, then shared by every head. The
 * rotation itself is f32x4.
 *
 * Threads take contiguous ranges of token rows. out may alias x: both halves of a
 * group of pairs are read before either is written. Only the heads * headDim
 * elements of each row are touched.
 */
#include "kiln_math.h"
#include "kiln_storage.h"

typedef struct {
  int32_t batch;
  int32_t seq_len;
  int32_t heads;
  int32_t head_dim;
  int32_t row_stride;   /* elements between token rows */
  int32_t dtype;
  int32_t sign;         /* +1 forward, -1 backward */
  int32_t pad;
  double pos_offset;
  const double* inv_freq; /* head_dim / 2 entries */
  const void* x;
  void* out;
  const int32_t* doc_starts; /* (batch, seq_len): packed rows, positions count from each document's start; null: from the row's */
} RopeArgs;

/* Frequencies whose cos / sin are computed together, then applied to every head. */
#define FREQ_BLOCK 64

/* Pairs [i, i+n) of one head (n <= 4), cos / sin at cs + i, sn + i. */
KILN_INLINE void rotate4(const void* x, void* out, size_t base, size_t half, size_t i, const float* cs, const float* sn, int n, const int dt) {
  if (n == 4) {
    const v128_t x0 = kiln_load4(x, base + i, dt), x1 = kiln_load4(x, base + half + i, dt);
    const v128_t c = wasm_v128_load(cs), s = wasm_v128_load(sn);
    kiln_store4(out, base + i, wasm_f32x4_sub(wasm_f32x4_mul(x0, c), wasm_f32x4_mul(x1, s)), dt);
    kiln_store4(out, base + half + i, KILN_MADD(wasm_f32x4_mul(x1, c), x0, s), dt);
  } else {
    const v128_t x0 = kiln_load_partial(x, base + i, n, dt, 0.0f), x1 = kiln_load_partial(x, base + half + i, n, dt, 0.0f);
    const v128_t c = wasm_v128_load(cs), s = wasm_v128_load(sn);
    kiln_store_partial(out, base + i, wasm_f32x4_sub(wasm_f32x4_mul(x0, c), wasm_f32x4_mul(x1, s)), n, dt);
    kiln_store_partial(out, base + half + i, KILN_MADD(wasm_f32x4_mul(x1, c), x0, s), n, dt);
  }
}

KILN_INLINE void rope_rows(const RopeArgs* a, size_t r0, size_t r1, const int dt) {
  const size_t half = (size_t)a->head_dim / 2;
  /* +4: a tail group of pairs loads whole vectors of cos / sin */
  float cs[FREQ_BLOCK + 4] __attribute__((aligned(16)));
  float sn[FREQ_BLOCK + 4] __attribute__((aligned(16)));
  for (size_t r = r0; r < r1; r++) {
    const double pos = a->pos_offset + (double)(r % (size_t)a->seq_len) - (a->doc_starts ? (double)a->doc_starts[r] : 0.0);
    const size_t row = r * (size_t)a->row_stride;
    for (size_t f0 = 0; f0 < half; f0 += FREQ_BLOCK) {
      const size_t nf = half - f0 < FREQ_BLOCK ? half - f0 : FREQ_BLOCK;
      for (size_t i = 0; i < nf; i++) {
        kiln_cos_sin(pos * a->inv_freq[f0 + i], &cs[i], &sn[i]);
        if (a->sign < 0) sn[i] = -sn[i];
      }
      for (size_t i = nf; i < FREQ_BLOCK + 4; i++) cs[i] = sn[i] = 0.0f;
      for (size_t h = 0; h < (size_t)a->heads; h++) {
        const size_t base = row + h * (size_t)a->head_dim + f0;
        size_t i = 0;
        for (; i + 4 <= nf; i += 4) rotate4(a->x, a->out, base, half, i, cs + i, sn + i, 4, dt);
        if (i < nf) rotate4(a->x, a->out, base, half, i, cs + i, sn + i, (int)(nf - i), dt);
      }
    }
  }
}

KILN_INLINE void rope(const RopeArgs* a, int thread, int nthreads) {
  size_t r0, r1;
  kiln_split((size_t)a->batch * (size_t)a->seq_len, 1, thread, nthreads, &r0, &r1);
  switch (a->dtype) {
    case KILN_DT_F32: rope_rows(a, r0, r1, KILN_DT_F32); break;
    case KILN_DT_BF16: rope_rows(a, r0, r1, KILN_DT_BF16); break;
    case KILN_DT_F16: rope_rows(a, r0, r1, KILN_DT_F16); break;
  }
}

KILN_EXPORT(kiln_rope)
void kiln_rope(const RopeArgs* a, int thread, int nthreads) { rope(a, thread, nthreads); }
