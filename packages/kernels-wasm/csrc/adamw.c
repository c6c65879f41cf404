/*
 * adamw: one fused AdamW step (decoupled weight decay, as torch.optim.AdamW).
 *
 *   g = grad[i] * grad_scale
 *   w = master ? master[i] : param[i]
 *   w = w * decay                          decay = 1 - lr * weight_decay
 *   m[i] = beta1 m[i] + (1 - beta1) g
 *   v[i] = beta2 v[i] + (1 - beta2) g^2
 *   w = w - step_size * m[i] / (sqrt(v[i]) * inv_sqrt_bc2 + eps)
 *         step_size = lr / (1 - beta1^step), inv_sqrt_bc2 = 1 / sqrt(1 - beta2^step)
 *   master[i] = w (when given);  param[i] = w rounded to the storage dtype
 *
 * The host computes decay, step_size, inv_sqrt_bc2 and the (1 - beta)
 * factors in f64 and passes them rounded to f32; the per-element math is f32.
 * param holds n elements of the storage dtype, grad of grad_dtype (the storage
 * dtype, or f32 beside f32 masters); m, v and master are f32. Threads take
 * contiguous chunks of whole 64-byte lines.
 */
#include "kiln_storage.h"

typedef struct {
  void* param;
  const void* grad;
  float* m;
  float* v;
  float* master;      /* NULL: the weights are param itself */
  int32_t n;
  int32_t dtype;
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float decay;
  float step_size;
  float inv_sqrt_bc2;
  float grad_scale;
  int32_t grad_dtype;
} AdamWArgs;

#define CHUNK_ALIGN 32

typedef struct {
  v128_t b1, c1, b2, c2, eps, decay, step, inv_bc2, gs;
} AdamWConstants;

/* Four elements: takes the weights w and gradients g (as f32), updates m[i..i+4) and v[i..i+4), returns the new weights. */
KILN_INLINE v128_t adamw4(const AdamWConstants* k, float* m_ptr, float* v_ptr, v128_t w, v128_t g) {
  g = wasm_f32x4_mul(g, k->gs);
  w = wasm_f32x4_mul(w, k->decay);
  const v128_t m = KILN_MADD(wasm_f32x4_mul(k->b1, wasm_v128_load(m_ptr)), k->c1, g);
  const v128_t v = KILN_MADD(wasm_f32x4_mul(k->b2, wasm_v128_load(v_ptr)), k->c2, wasm_f32x4_mul(g, g));
  wasm_v128_store(m_ptr, m);
  wasm_v128_store(v_ptr, v);
  const v128_t denom = KILN_MADD(k->eps, wasm_f32x4_sqrt(v), k->inv_bc2);
  return wasm_f32x4_sub(w, wasm_f32x4_div(wasm_f32x4_mul(k->step, m), denom));
}

KILN_INLINE void adamw_range(const AdamWArgs* g, size_t lo, size_t hi, int dt, int gdt, int has_master) {
  const AdamWConstants k = {
    wasm_f32x4_splat(g->beta1), wasm_f32x4_splat(g->one_minus_beta1),
    wasm_f32x4_splat(g->beta2), wasm_f32x4_splat(g->one_minus_beta2),
    wasm_f32x4_splat(g->eps), wasm_f32x4_splat(g->decay),
    wasm_f32x4_splat(g->step_size), wasm_f32x4_splat(g->inv_sqrt_bc2), wasm_f32x4_splat(g->grad_scale),
  };
  size_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    v128_t g0, g1, w0, w1;
    kiln_load8(g->grad, i, gdt, &g0, &g1);
    if (has_master) {
      w0 = wasm_v128_load(g->master + i);
      w1 = wasm_v128_load(g->master + i + 4);
    } else {
      kiln_load8(g->param, i, dt, &w0, &w1);
    }
    w0 = adamw4(&k, g->m + i, g->v + i, w0, g0);
    w1 = adamw4(&k, g->m + i + 4, g->v + i + 4, w1, g1);
    if (has_master) {
      wasm_v128_store(g->master + i, w0);
      wasm_v128_store(g->master + i + 4, w1);
    }
    kiln_store8(g->param, i, w0, w1, dt);
  }
  /* The last elements one at a time through lane 0, with the same arithmetic. */
  for (; i < hi; i++) {
    float m = g->m[i], v = g->v[i];
    const v128_t w = wasm_f32x4_splat(has_master ? g->master[i] : kiln_load1(g->param, i, dt));
    float lanes_m[4] = {m, 0, 0, 0}, lanes_v[4] = {v, 0, 0, 0};
    const float out = wasm_f32x4_extract_lane(adamw4(&k, lanes_m, lanes_v, w, wasm_f32x4_splat(kiln_load1(g->grad, i, gdt))), 0);
    g->m[i] = lanes_m[0];
    g->v[i] = lanes_v[0];
    if (has_master) g->master[i] = out;
    kiln_store1(g->param, i, out, dt);
  }
}

KILN_EXPORT(kiln_adamw)
void kiln_adamw(const AdamWArgs* g, int thread, int nthreads) {
  size_t lo, hi;
  kiln_split((size_t)g->n, CHUNK_ALIGN, thread, nthreads, &lo, &hi);
  const int master = g->master != NULL;
  /* f32 gradients of 16-bit parameters: the dtype pairs that can be wide. */
  const int wide = g->grad_dtype != g->dtype;
  switch (g->dtype * 4 + wide * 2 + master) {
    case KILN_DT_F32 * 4: adamw_range(g, lo, hi, KILN_DT_F32, KILN_DT_F32, 0); break;
    case KILN_DT_F32 * 4 + 1: adamw_range(g, lo, hi, KILN_DT_F32, KILN_DT_F32, 1); break;
    case KILN_DT_BF16 * 4: adamw_range(g, lo, hi, KILN_DT_BF16, KILN_DT_BF16, 0); break;
    case KILN_DT_BF16 * 4 + 1: adamw_range(g, lo, hi, KILN_DT_BF16, KILN_DT_BF16, 1); break;
    case KILN_DT_BF16 * 4 + 2: adamw_range(g, lo, hi, KILN_DT_BF16, KILN_DT_F32, 0); break;
    case KILN_DT_BF16 * 4 + 3: adamw_range(g, lo, hi, KILN_DT_BF16, KILN_DT_F32, 1); break;
    case KILN_DT_F16 * 4: adamw_range(g, lo, hi, KILN_DT_F16, KILN_DT_F16, 0); break;
    case KILN_DT_F16 * 4 + 1: adamw_range(g, lo, hi, KILN_DT_F16, KILN_DT_F16, 1); break;
    case KILN_DT_F16 * 4 + 2: adamw_range(g, lo, hi, KILN_DT_F16, KILN_DT_F32, 0); break;
    default: adamw_range(g, lo, hi, KILN_DT_F16, KILN_DT_F32, 1); break;
  }
}
