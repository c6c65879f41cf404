// moe_route.cu: mixture-of-experts routing and its gradient.
// T tokens, E experts, top k. logits / dLogits (T, E) and weights / dWeights (T, k) in
// the storage dtype; probs (T, E) f32; experts and slots (T, k) i32; offsets (E + 1) i32.
//
// moeRoute:
//   probs[t, :] = softmax(logits[t, :]); experts[t, :] = the k largest logits (a larger
//   logit first, equal logits: the lower index first); weights[t, j] = probs of the chosen
//   experts over their sum; offsets[e] = assignments to experts < e; slots[t, j] =
//   offsets[e] + assignments to e = experts[t, j] by tokens < t;
//   auxLoss = alpha * E * sum_e (count_e / (T k)) * mean_t probs[t, e].
// Three launches; integer counts and f32 sums in a fixed order (no float atomics), so
// every output is the same for any schedule. Tokens are cut into chunks of kChunk.
//   1. route_kernel, a block per chunk, a warp per token: max and sum of exp by warp
//      butterflies, probs; the k picks by k warp arg-max passes, pass j taking the best
//      logit ordered after pick j-1; weights. Then a thread per expert walks the
//      chunk's tokens in order: count[c, e] (its assignments) and psum[c, e] (sum of its
//      probs), both in scratch, (chunks, E).
//   2. scan_kernel, one block, a thread per expert: total_e = sum_c count[c, e] (chunk
//      order); offsets = exclusive scan of the totals; count[c, e] is replaced by
//      base[c, e] = offsets[e] + sum_{c' < c} count[c', e]; auxLoss from the totals and
//      sum_c psum[c, e], added over the experts by a fixed tree.
//   3. slots_kernel, a block per chunk, a thread per expert walks the chunk's tokens in
//      order and numbers its assignments from base[c, e].
//
// moeRouteBackward (dLogits written, not accumulated), a warp per token:
//   dLogits[t, e] = probs[t, e] * (g_e - sum_e' probs[t, e'] g_e')
//                 + sum over j with experts[t, j] = e of w_j (dWeights[t, j] - sum_j' w_j' dWeights[t, j'])
//   with w = weights[t, :], g_e = auxScale * alpha * E * count_e / (T k) / T, count_e from offsets.
#include <cmath>

#include "block_scan.h"
#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 128;  // tokens per block in route_kernel / slots_kernel
constexpr int kScanThreads = 1024;

__device__ __forceinline__ float neg_inf() { return __int_as_float(static_cast<int>(0xff800000u)); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

/** True when (za, ea) comes before (zb, eb) in routing order: larger logit, then lower index. */
__device__ __forceinline__ bool routes_before(float za, int ea, float zb, int eb) { return za > zb || (za == zb && ea < eb); }

template <typename T>
__global__ void __launch_bounds__(kThreads) route_kernel(const T* logits, float* probs, int32_t* experts, T* weights, int32_t* count, float* psum, int64_t tokens, int E,
                                                         int k) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t0 = int64_t{blockIdx.x} * kChunk;
  const int64_t t1 = t0 + kChunk < tokens ? t0 + kChunk : tokens;
  for (int64_t t = t0 + warp; t < t1; t += kWarps) {
    const T* z = logits + t * E;
    float m = neg_inf();
    for (int e = lane; e < E; e += 32) m = fmaxf(m, to_f32(z[e]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.f;
    for (int e = lane; e < E; e += 32) s += expf(to_f32(z[e]) - m);
    s = warp_sum_f32(s);
    float* p = probs + t * E;
    for (int e = lane; e < E; e += 32) p[e] = expf(to_f32(z[e]) - m) / s;

    // Pick j: the first (in routing order) of the logits after pick j - 1.
    float prev_z = pos_inf(), chosen = 0.f;
    int prev_e = -1;
    for (int j = 0; j < k; j++) {
      float bz = neg_inf();
      int be = 0x7fffffff;
      for (int e = lane; e < E; e += 32) {
        const float v = to_f32(z[e]);
        if (routes_before(prev_z, prev_e, v, e) && routes_before(v, e, bz, be)) {
          bz = v;
          be = e;
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float oz = __shfl_xor_sync(0xffffffffu, bz, o);
        const int oe = __shfl_xor_sync(0xffffffffu, be, o);
        if (routes_before(oz, oe, bz, be)) {
          bz = oz;
          be = oe;
        }
      }
      prev_z = bz;
      prev_e = be;
      if (lane == 0) experts[t * k + j] = be;
      chosen += expf(bz - m) / s;  // the same expression as probs
    }
    __syncwarp();
    for (int j = lane; j < k; j += 32) {
      const int e = experts[t * k + j];
      const float pe = e < E ? expf(to_f32(z[e]) - m) / s : 0.f;  // e >= E only for NaN logits
      weights[t * k + j] = from_f32<T>(pe / chosen);
    }
  }
  __syncthreads();  // the chunk's experts and probs are written
  const int64_t c = blockIdx.x;
  for (int e = threadIdx.x; e < E; e += kThreads) {
    int32_t n = 0;
    float ps = 0.f;
    for (int64_t t = t0; t < t1; t++) {
      ps += probs[t * E + e];
      for (int j = 0; j < k; j++) n += experts[t * k + j] == e ? 1 : 0;
    }
    count[c * E + e] = n;
    psum[c * E + e] = ps;
  }
}

__global__ void __launch_bounds__(kScanThreads) scan_kernel(int32_t* count, const float* psum, int32_t* offsets, float* aux_loss, int64_t chunks, int E, int64_t tokens,
                                                            int k, float alpha) {
  __shared__ int32_t scan_scratch[33];
  __shared__ float sum_scratch[33];
  const float inv_assignments = 1.f / static_cast<float>(tokens * k), inv_tokens = 1.f / static_cast<float>(tokens);
  int32_t carry = 0;
  float aux = 0.f;
  for (int e0 = 0; e0 < E; e0 += kScanThreads) {
    const int e = e0 + static_cast<int>(threadIdx.x);
    int32_t total = 0;
    float ps = 0.f;
    if (e < E) {
      for (int64_t c = 0; c < chunks; c++) {
        total += count[c * E + e];
        ps += psum[c * E + e];
      }
      aux += (static_cast<float>(total) * inv_assignments) * (ps * inv_tokens);
    }
    int32_t step_total;
    const int32_t start = carry + block_exclusive_sum(total, scan_scratch, step_total);
    if (e < E) {
      offsets[e] = start;
      int32_t run = start;
      for (int64_t c = 0; c < chunks; c++) {
        const int32_t n = count[c * E + e];
        count[c * E + e] = run;
        run += n;
      }
    }
    carry += step_total;
  }
  aux = block_sum_f32(aux, sum_scratch);
  if (threadIdx.x == 0) {
    offsets[E] = carry;
    aux_loss[0] = alpha * static_cast<float>(E) * aux;
  }
}

__global__ void __launch_bounds__(kThreads) slots_kernel(const int32_t* experts, const int32_t* base, int32_t* slots, int64_t tokens, int E, int k) {
  const int64_t t0 = int64_t{blockIdx.x} * kChunk;
  const int64_t t1 = t0 + kChunk < tokens ? t0 + kChunk : tokens;
  const int64_t c = blockIdx.x;
  for (int e = threadIdx.x; e < E; e += kThreads) {
    int32_t run = base[c * E + e];
    for (int64_t t = t0; t < t1; t++)
      for (int j = 0; j < k; j++)
        if (experts[t * k + j] == e) slots[t * k + j] = run++;
  }
}

size_t align_up(size_t x) { return (x + 255) & ~size_t{255}; }

// moeRoute: logits, probs, experts, weights, offsets, slots, auxLoss | tokens, numExperts, topK, alpha, dtype
void launch_moe_route(const KernelCall& c) {
  const int64_t tokens = c.i64(7);
  const int E = c.i32(8), k = c.i32(9);
  const float alpha = c.f32(10);
  const int64_t chunks = (tokens + kChunk - 1) / kChunk;
  dispatch_float(c.i32(11), "moeRoute", [&](auto tag) {
    using T = decltype(tag);
    const size_t table = align_up(sizeof(int32_t) * static_cast<size_t>(chunks) * E);
    char* scratch = static_cast<char*>(c.scratch(2 * table));
    int32_t* count = reinterpret_cast<int32_t*>(scratch);
    float* psum = reinterpret_cast<float*>(scratch + table);
    float* probs = c.ptr<float>(1);
    int32_t* experts = c.ptr<int32_t>(2);
    int32_t* offsets = c.ptr<int32_t>(4);
    const char* name = "moeRoute";
    launch(name, route_kernel<T>, static_cast<unsigned>(chunks), kThreads, 0, c.stream, c.ptr<const T>(0), probs, experts, c.ptr<T>(3), count, psum, tokens, E, k);
    launch(name, scan_kernel, 1, kScanThreads, 0, c.stream, count, static_cast<const float*>(psum), offsets, c.ptr<float>(6), chunks, E, tokens, k, alpha);
    launch(name, slots_kernel, static_cast<unsigned>(chunks), kThreads, 0, c.stream, static_cast<const int32_t*>(experts), static_cast<const int32_t*>(count),
           c.ptr<int32_t>(5), tokens, E, k);
  });
}

// ---------------------------------------------------------------- backward

template <typename T>
__global__ void __launch_bounds__(kThreads) route_backward_kernel(const T* d_weights, const T* weights, const int32_t* experts, const float* probs, const int32_t* offsets,
                                                                  T* d_logits, int64_t tokens, int E, int k, float aux_coef) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  if (t >= tokens) return;
  const T* w = weights + t * k;
  const T* dw = d_weights + t * k;
  const int32_t* ex = experts + t * k;
  const float* p = probs + t * E;
  float wd = 0.f;  // sum_j w_j dWeights_j, the same sequence in every lane
  for (int j = 0; j < k; j++) wd += to_f32(w[j]) * to_f32(dw[j]);
  float pg = 0.f;
  for (int e = lane; e < E; e += 32) pg += p[e] * (aux_coef * static_cast<float>(offsets[e + 1] - offsets[e]));
  pg = warp_sum_f32(pg);
  T* out = d_logits + t * E;
  for (int e = lane; e < E; e += 32) {
    const float g = aux_coef * static_cast<float>(offsets[e + 1] - offsets[e]);
    float v = p[e] * (g - pg);
    for (int j = 0; j < k; j++)
      if (ex[j] == e) v += to_f32(w[j]) * (to_f32(dw[j]) - wd);
    out[e] = from_f32<T>(v);
  }
}

// moeRouteBackward: dWeights, weights, experts, probs, offsets, dLogits | tokens, numExperts, topK, alpha, auxScale, dtype
void launch_moe_route_backward(const KernelCall& c) {
  const int64_t tokens = c.i64(6);
  const int E = c.i32(7), k = c.i32(8);
  // g_e = aux_coef * count_e; the constant in f64 on the host.
  const double tk = static_cast<double>(tokens) * k;
  const float aux_coef = static_cast<float>(c.at(10) * c.at(9) * E / tk / static_cast<double>(tokens));
  dispatch_float(c.i32(11), "moeRouteBackward", [&](auto tag) {
    using T = decltype(tag);
    launch("moeRouteBackward", route_backward_kernel<T>, ceil_div(tokens, kWarps), kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<const T>(1), c.ptr<const int32_t>(2),
           c.ptr<const float>(3), c.ptr<const int32_t>(4), c.ptr<T>(5), tokens, E, k, aux_coef);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("moeRoute", launch_moe_route);
KILN_REGISTER_KERNEL("moeRouteBackward", launch_moe_route_backward);

}  // namespace kiln
