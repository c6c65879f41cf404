/*
 * Mixture-of-experts routing (dropless top-k) and its gradient.
 *
 * T tokens, E experts, top k. logits, weights, dWeights and dLogits are in the
 * storage dtype; probs (T, E) is f32; experts, offsets and slots are i32.
 *
 *   probs[t, :]   = softmax(logits[t, :])
 *   experts[t, j] = the j-th largest logit of row t (equal logits: lower expert first)
 *   weights[t, j] = probs[t, experts[t, j]] / sum_j' probs[t, experts[t, j']]
 *   offsets[e]    = assignments to experts < e;  offsets[E] = T*k
 *   slots[t, j]   = offsets[experts[t, j]] + assignments to that expert by tokens < t
 *   auxLoss       = alpha * E * sum_e (count_e / (T*k)) * mean_t probs[t, e]
 *
 * Experts are chosen by comparing the logits themselves (exact in every dtype),
 * so the i32 outputs are the same on every backend.
 *
 * Forward, in two calls:
 *   1. kiln_moe_route: threads take contiguous ranges of tokens; each row's
 *      logits go to its probs row as f32, the top k are picked by insertion
 *      (scanning experts in increasing order, a later equal logit never passes
 *      an earlier one), then the row becomes its softmax and the weights follow.
 *   2. kiln_moe_route_offsets (one thread): counts, offsets, slots in token
 *      order, and auxLoss with the column sums of probs in f64, token order.
 *
 * Backward (kiln_moe_route_backward), threads take ranges of tokens:
 *   g_e           = auxScale * alpha * E * (count_e / (T*k)) / T
 *   dLogits[t, e] = probs[t, e] * (g_e - sum_e' probs[t, e'] g_e')
 *                 + w_j (dWeights[t, j] - sum_j' w_j' dWeights[t, j'])   where e = experts[t, j]
 * Each row is built in f32 in the thread's scratch and stored (rounded) once.
 * Sums over e run in four f32 lanes, then across lanes; sums over j in j order.
 */
#include "kiln_math.h"
#include "kiln_storage.h"

/* Host-written argument blocks; mirrored in src/backend-moe-route.ts. */
typedef struct {
  int32_t tokens, num_experts, top_k, dtype;
  float alpha;
  const void* logits;
  float* probs;
  int32_t* experts;
  void* weights;
  int32_t* offsets;
  int32_t* slots;
  float* aux_loss;
  uint8_t* scratch;       /* offsets pass: E doubles, then E int32 */
} RouteArgs;

typedef struct {
  int32_t tokens, num_experts, top_k, dtype;
  float alpha, aux_scale;
  const void* d_weights;
  const void* weights;
  const int32_t* experts;
  const float* probs;
  const int32_t* offsets;
  void* d_logits;
  float* scratch;         /* thread t: 2 * row_floats floats at scratch + t * 2 * row_floats */
  int32_t row_floats;     /* E rounded up to a multiple of 4 */
} RouteBackwardArgs;

/* Lanes [0, count) set, the others clear. */
KILN_INLINE v128_t lanes_below(int count) {
  return wasm_i32x4_lt(wasm_i32x4_make(0, 1, 2, 3), wasm_i32x4_splat(count));
}

/* Indices of the k largest values of row[0..E) into top[0..k), largest first, equal values by lower index. */
KILN_INLINE void top_k(const float* row, int E, int k, int32_t* top) {
  int have = 0;
  for (int e = 0; e < E; e++) {
    const float v = row[e];
    if (have == k && !(v > row[top[k - 1]])) continue;
    int pos = have < k ? have++ : k - 1;
    while (pos > 0 && row[top[pos - 1]] < v) {
      top[pos] = top[pos - 1];
      pos--;
    }
    top[pos] = e;
  }
}

/* row[0..E) = softmax(row[0..E)), given its largest value; sum in f32 lanes. */
KILN_INLINE void softmax_row(float* row, int E, float max) {
  const v128_t m = wasm_f32x4_splat(max);
  v128_t sum = wasm_f32x4_splat(0.0f);
  int e = 0;
  for (; e + 4 <= E; e += 4) {
    const v128_t x = kiln_exp_f32x4(wasm_f32x4_sub(wasm_v128_load(row + e), m));
    wasm_v128_store(row + e, x);
    sum = wasm_f32x4_add(sum, x);
  }
  const int tail = E - e;
  if (tail) {
    const v128_t x = kiln_exp_f32x4(wasm_f32x4_sub(kiln_load_partial(row, e, tail, KILN_DT_F32, max), m));
    kiln_store_partial(row, e, x, tail, KILN_DT_F32);
    sum = wasm_f32x4_add(sum, wasm_v128_and(x, lanes_below(tail)));
  }
  const v128_t s = wasm_f32x4_splat(kiln_hsum(sum));
  for (e = 0; e + 4 <= E; e += 4) wasm_v128_store(row + e, wasm_f32x4_div(wasm_v128_load(row + e), s));
  for (; e < E; e++) row[e] /= wasm_f32x4_extract_lane(s, 0);
}

KILN_INLINE void route_rows(const RouteArgs* a, size_t t0, size_t t1, const int dt) {
  const int E = a->num_experts, k = a->top_k;
  for (size_t t = t0; t < t1; t++) {
    float* row = a->probs + t * E;
    int e = 0;
    for (; e + 4 <= E; e += 4) wasm_v128_store(row + e, kiln_load4(a->logits, t * E + e, dt));
    for (; e < E; e++) row[e] = kiln_load1(a->logits, t * E + e, dt);
    int32_t* top = a->experts + t * k;
    top_k(row, E, k, top);
    softmax_row(row, E, row[top[0]]);
    float chosen = 0.0f;
    for (int j = 0; j < k; j++) chosen += row[top[j]];
    for (int j = 0; j < k; j++) kiln_store1(a->weights, t * k + j, row[top[j]] / chosen, dt);
  }
}

KILN_EXPORT(kiln_moe_route)
void kiln_moe_route(const RouteArgs* a, int thread, int nthreads) {
  size_t t0, t1;
  kiln_split((size_t)a->tokens, 1, thread, nthreads, &t0, &t1);
  switch (a->dtype) {
    case KILN_DT_F32: route_rows(a, t0, t1, KILN_DT_F32); break;
    case KILN_DT_BF16: route_rows(a, t0, t1, KILN_DT_BF16); break;
    case KILN_DT_F16: route_rows(a, t0, t1, KILN_DT_F16); break;
  }
}

KILN_EXPORT(kiln_moe_route_offsets)
void kiln_moe_route_offsets(const RouteArgs* a, int thread, int nthreads) {
  (void)nthreads;
  if (thread != 0) return;
  const int E = a->num_experts;
  const size_t T = (size_t)a->tokens, n = T * (size_t)a->top_k;
  double* col_sum = (double*)a->scratch;
  int32_t* next = (int32_t*)(col_sum + E);

  for (int e = 0; e <= E; e++) a->offsets[e] = 0;
  for (size_t i = 0; i < n; i++) a->offsets[a->experts[i] + 1]++;
  for (int e = 0; e < E; e++) {
    a->offsets[e + 1] += a->offsets[e];
    next[e] = a->offsets[e];
  }
  for (size_t i = 0; i < n; i++) a->slots[i] = next[a->experts[i]]++;

  /* Column sums of probs, two experts per f64x2, in token order. */
  for (int e = 0; e < E; e++) col_sum[e] = 0.0;
  for (size_t t = 0; t < T; t++) {
    const float* row = a->probs + t * E;
    int e = 0;
    for (; e + 4 <= E; e += 4) {
      const v128_t p = wasm_v128_load(row + e);
      wasm_v128_store(col_sum + e, wasm_f64x2_add(wasm_v128_load(col_sum + e), wasm_f64x2_promote_low_f32x4(p)));
      const v128_t hi = wasm_i32x4_shuffle(p, p, 2, 3, 0, 1);
      wasm_v128_store(col_sum + e + 2, wasm_f64x2_add(wasm_v128_load(col_sum + e + 2), wasm_f64x2_promote_low_f32x4(hi)));
    }
    for (; e < E; e++) col_sum[e] += row[e];
  }
  double aux = 0.0;
  for (int e = 0; e < E; e++) aux += ((double)(a->offsets[e + 1] - a->offsets[e]) / (double)n) * (col_sum[e] / (double)T);
  a->aux_loss[0] = (float)((double)a->alpha * E * aux);
}

KILN_INLINE void route_backward_rows(const RouteBackwardArgs* a, const float* g, float* row, size_t t0, size_t t1, const int dt) {
  const int E = a->num_experts, k = a->top_k;
  for (size_t t = t0; t < t1; t++) {
    const float* p = a->probs + t * E;
    /* pg = sum_e p_e g_e */
    v128_t acc = wasm_f32x4_splat(0.0f);
    int e = 0;
    for (; e + 4 <= E; e += 4) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(p + e), wasm_v128_load(g + e)));
    const int tail = E - e;
    if (tail) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(kiln_load_partial(p, e, tail, KILN_DT_F32, 0.0f), wasm_v128_load(g + e)));
    const v128_t pg = wasm_f32x4_splat(kiln_hsum(acc));
    for (e = 0; e < E; e += 4) {
      const v128_t pe = e + 4 <= E ? wasm_v128_load(p + e) : kiln_load_partial(p, e, E - e, KILN_DT_F32, 0.0f);
      wasm_v128_store(row + e, wasm_f32x4_mul(pe, wasm_f32x4_sub(wasm_v128_load(g + e), pg)));
    }
    /* The routing weights' part: a softmax over the chosen experts. */
    float wd = 0.0f;
    for (int j = 0; j < k; j++) wd += kiln_load1(a->weights, t * k + j, dt) * kiln_load1(a->d_weights, t * k + j, dt);
    for (int j = 0; j < k; j++) {
      const float w = kiln_load1(a->weights, t * k + j, dt);
      row[a->experts[t * k + j]] += w * (kiln_load1(a->d_weights, t * k + j, dt) - wd);
    }
    for (e = 0; e + 4 <= E; e += 4) kiln_store4(a->d_logits, t * E + e, wasm_v128_load(row + e), dt);
    if (e < E) kiln_store_partial(a->d_logits, t * E + e, wasm_v128_load(row + e), E - e, dt);
  }
}

KILN_EXPORT(kiln_moe_route_backward)
void kiln_moe_route_backward(const RouteBackwardArgs* a, int thread, int nthreads) {
  const int E = a->num_experts;
  float* g = a->scratch + (size_t)thread * 2 * a->row_floats;
  float* row = g + a->row_floats;
  const double n = (double)a->tokens * a->top_k;
  const double scale = (double)a->aux_scale * a->alpha * E / a->tokens;
  for (int e = 0; e < a->row_floats; e++) g[e] = e < E ? (float)(scale * ((a->offsets[e + 1] - a->offsets[e]) / n)) : 0.0f;
  size_t t0, t1;
  kiln_split((size_t)a->tokens, 1, thread, nthreads, &t0, &t1);
  switch (a->dtype) {
    case KILN_DT_F32: route_backward_rows(a, g, row, t0, t1, KILN_DT_F32); break;
    case KILN_DT_BF16: route_backward_rows(a, g, row, t0, t1, KILN_DT_BF16); break;
    case KILN_DT_F16: route_backward_rows(a, g, row, t0, t1, KILN_DT_F16); break;
  }
}
