// adamw.cu: one fused AdamW step (decoupled weight decay, as torch.optim.AdamW),
// per element i < n, f32 arithmetic:
//   g = grad[i] * grad_scale
//   w = master ? master[i] : param[i]
//   w = w * decay                                   decay = 1 - lr * weight_decay
//   m[i] = beta1 m[i] + (1 - beta1) g
//   v[i] = beta2 v[i] + (1 - beta2) g^2
//   w = w - step_size * m[i] / (sqrt(v[i]) * inv_sqrt_bc2 + eps)
//         step_size = lr / (1 - beta1^step), inv_sqrt_bc2 = 1 / sqrt(1 - beta2^step)
//   master[i] = w (when given);  param[i] = w rounded to the storage dtype
// The host computes decay, step_size, inv_sqrt_bc2 and the (1 - beta) factors in f64
// and passes them as f32.
// Layout: param holds n elements of the storage dtype, grad n of the gradient dtype
// (the storage dtype, or f32 beside f32 masters: mixed precision's update, the 16-bit
// parameters rounded from the masters in the same pass); m, v, master are f32; all
// contiguous. Each element is read and written by one thread only.
// When every pointer is 16-byte aligned, a thread handles 4 consecutive elements with
// vector loads/stores; otherwise one element at a time (same per-element math).
#include <cmath>
#include <type_traits>

#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

struct AdamWConst {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, decay, step_size, inv_sqrt_bc2, grad_scale;
};

/** The new weight of one element; updates m and v in place. */
__device__ __forceinline__ float adamw_elem(const AdamWConst& k, float w, float g, float& m, float& v) {
  g *= k.grad_scale;
  w *= k.decay;
  m = k.beta1 * m + k.one_minus_beta1 * g;
  v = k.beta2 * v + k.one_minus_beta2 * (g * g);
  return w - k.step_size * m / (sqrtf(v) * k.inv_sqrt_bc2 + k.eps);
}

template <typename T>
struct Pack4 {
  static constexpr int kBytes = 4 * static_cast<int>(sizeof(T));
  using Raw = typename std::conditional<sizeof(T) == 4, uint4, uint2>::type;
  union {
    Raw raw;
    T e[4];
  };
};

template <typename T, typename G>
__global__ void __launch_bounds__(kThreads) adamw_scalar_kernel(T* param, const G* grad, float* m, float* v, float* master, int64_t n, AdamWConst k) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    const float w0 = master ? master[i] : to_f32(param[i]);
    float mi = m[i], vi = v[i];
    const float w = adamw_elem(k, w0, to_f32(grad[i]), mi, vi);
    m[i] = mi;
    v[i] = vi;
    if (master) master[i] = w;
    param[i] = from_f32<T>(w);
  }
}

/** Four elements per thread step; every pointer 16-byte aligned (8-byte for 16-bit param/grad). */
template <typename T, typename G, bool kMaster>
__global__ void __launch_bounds__(kThreads) adamw_vec4_kernel(T* param, const G* grad, float* m, float* v, float* master, int64_t n, AdamWConst k) {
  using Raw = typename Pack4<T>::Raw;
  const int64_t quads = n / 4;
  for (int64_t q = blockIdx.x * int64_t{kThreads} + threadIdx.x; q < quads; q += int64_t{gridDim.x} * kThreads) {
    Pack4<G> g;
    Pack4<T> p;
    g.raw = reinterpret_cast<const typename Pack4<G>::Raw*>(grad)[q];
    float4 w;
    if (kMaster) {
      w = reinterpret_cast<const float4*>(master)[q];
    } else {
      p.raw = reinterpret_cast<const Raw*>(param)[q];
      w = make_float4(to_f32(p.e[0]), to_f32(p.e[1]), to_f32(p.e[2]), to_f32(p.e[3]));
    }
    float4 mm = reinterpret_cast<const float4*>(m)[q];
    float4 vv = reinterpret_cast<const float4*>(v)[q];
    w.x = adamw_elem(k, w.x, to_f32(g.e[0]), mm.x, vv.x);
    w.y = adamw_elem(k, w.y, to_f32(g.e[1]), mm.y, vv.y);
    w.z = adamw_elem(k, w.z, to_f32(g.e[2]), mm.z, vv.z);
    w.w = adamw_elem(k, w.w, to_f32(g.e[3]), mm.w, vv.w);
    reinterpret_cast<float4*>(m)[q] = mm;
    reinterpret_cast<float4*>(v)[q] = vv;
    if (kMaster) reinterpret_cast<float4*>(master)[q] = w;
    p.e[0] = from_f32<T>(w.x);
    p.e[1] = from_f32<T>(w.y);
    p.e[2] = from_f32<T>(w.z);
    p.e[3] = from_f32<T>(w.w);
    reinterpret_cast<Raw*>(param)[q] = p.raw;
  }
  // The last n % 4 elements, one thread each.
  const int64_t tail = quads * 4 + blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (tail < n) {
    const float w0 = kMaster ? master[tail] : to_f32(param[tail]);
    float mi = m[tail], vi = v[tail];
    const float w = adamw_elem(k, w0, to_f32(grad[tail]), mi, vi);
    m[tail] = mi;
    v[tail] = vi;
    if (kMaster) master[tail] = w;
    param[tail] = from_f32<T>(w);
  }
}

bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

// adamW: param, grad, m, v, master | n, lr, beta1, beta2, eps, weightDecay, step, gradScale, dtype, gradDtype
void launch_adamw(const KernelCall& c) {
  const int64_t n = c.i64(5);
  const double lr = c.at(6), beta1 = c.at(7), beta2 = c.at(8), eps = c.at(9), wd = c.at(10), step = c.at(11), gs = c.at(12);
  const double bc1 = 1.0 - std::pow(beta1, step);
  const double bc2 = 1.0 - std::pow(beta2, step);
  AdamWConst k;
  k.beta1 = static_cast<float>(beta1);
  k.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  k.beta2 = static_cast<float>(beta2);
  k.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  k.eps = static_cast<float>(eps);
  k.decay = static_cast<float>(1.0 - lr * wd);
  k.step_size = static_cast<float>(lr / bc1);
  k.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  k.grad_scale = static_cast<float>(gs);
  dispatch_float_grad(c.i32(13), c.i32(14), "adamW", [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    T* param = c.ptr<T>(0);
    const G* grad = c.ptr<const G>(1);
    float* m = c.ptr<float>(2);
    float* v = c.ptr<float>(3);
    float* master = c.ptr<float>(4);
    const bool vec = aligned(param, Pack4<T>::kBytes) && aligned(grad, Pack4<G>::kBytes) && aligned(m, 16) && aligned(v, 16) && (!master || aligned(master, 16));
    if (!vec) {
      launch("adamW", adamw_scalar_kernel<T, G>, grid_stride_blocks(n, kThreads), kThreads, 0, c.stream, param, grad, m, v, master, n, k);
    } else {
      // At least one block: enough threads for the quads and for the n % 4 tail elements.
      const int64_t work = n / 4;
      if (master)
        launch("adamW", adamw_vec4_kernel<T, G, true>, grid_stride_blocks(work, kThreads), kThreads, 0, c.stream, param, grad, m, v, master, n, k);
      else
        launch("adamW", adamw_vec4_kernel<T, G, false>, grid_stride_blocks(work, kThreads), kThreads, 0, c.stream, param, grad, m, v, master, n, k);
    }
  });
}

}  // namespace

KILN_REGISTER_KERNEL("adamW", launch_adamw);

}  // namespace kiln
