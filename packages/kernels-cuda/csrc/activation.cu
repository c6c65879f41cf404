// activation.cu: element-wise GELU (tanh approximation), SiLU, SwiGLU and GeGLU, forward
// and backward, in f32 / bf16 / f16 storage with f32 arithmetic.
//
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//            = x * sigmoid(z),       z = 2u        (0.5 (1 + tanh u) = sigmoid(2u))
//   gelu'(x) = s + x s (1 - s) z',   s = sigmoid(z),  z' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//   silu(x)  = x s,  silu'(x) = s (1 + x (1 - s)) = s + x s (1 - s),  s = sigmoid(x)
//   swiglu:  out = silu(gate) * up;  dGate = dOut * up * silu'(gate),  dUp = dOut * silu(gate)
//   geglu:   the same with gelu in place of silu (swiGlu* with activation "gelu": Gemma's MLP);
//            the gate's activation is chosen per launch (a kernel template argument)
//
// sigmoid(z) is formed from e = exp(-|z|) <= 1 (never overflows), which gives both
// s and 1 - s without cancellation: z >= 0: s = 1 / (1 + e), 1 - s = e s;
// z < 0: s = e / (1 + e), 1 - s = 1 / (1 + e). With bf16/f16 storage, e and 1 / (1 + e)
// come from the special-function unit (__expf, __fdividef: a few f32 ulps, far below
// the storage's rounding, in a handful of instructions instead of expf's and an IEEE
// division's); f32 keeps expf and the exact division.
//
// Layout: every operand is n contiguous elements. When every pointer of a call is
// 16-byte aligned, each thread moves 16 bytes per operand at a time (4 f32 or 8
// bf16/f16), the last n % vec elements element by element; otherwise element by
// element throughout. out may alias x (dX may alias dOut): each element is read
// before it is written, by the same thread.
//
// gelu/silu backward with dXColSums (a linear layer's bias gradient): the rows of `cols`
// are walked as sumRows walks them (chunk_partials.h's grid: 32 column groups x 8 row
// lanes a block, a chunk of rows down), each thread writing its dX and adding the
// values as stored into its columns' sums; lanes, then chunks, are added in a fixed order.
#include <type_traits>

#include "chunk_partials.h"
#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

enum Op : int { kGeluFwd, kGeluBwd, kSiluFwd, kSiluBwd, kSwiGluFwd, kSwiGluBwd, kGeGluFwd, kGeGluBwd };

constexpr bool reads_in1(int op) { return op != kGeluFwd && op != kSiluFwd; }
constexpr bool reads_in2(int op) { return op == kSwiGluBwd || op == kGeGluBwd; }
constexpr bool writes_out1(int op) { return op == kSwiGluBwd || op == kGeGluBwd; }

/** The swiGlu* kernels' activation codes (src/kernel-call.ts sends them after the dtype). */
enum GateActivation : int { kGateSilu = 0, kGateGelu = 1 };

struct Sigmoid {
  float s;   // sigmoid(z)
  float s1;  // 1 - sigmoid(z)
};

template <bool FAST>
__device__ __forceinline__ Sigmoid sigmoid(float z) {
  const float e = FAST ? __expf(-fabsf(z)) : expf(-fabsf(z));
  const float q = FAST ? __fdividef(1.0f, 1.0f + e) : 1.0f / (1.0f + e);
  const float eq = e * q;
  return z < 0.0f ? Sigmoid{eq, q} : Sigmoid{q, eq};
}

constexpr float kGeluK0 = 1.5957691216057308f;   // 2 sqrt(2/pi)
constexpr float kGeluK1 = 0.07135481627260025f;  // 2 sqrt(2/pi) * 0.044715

template <bool FAST>
__device__ __forceinline__ float gelu_fwd(float x) { return x * sigmoid<FAST>(x * fmaf(kGeluK1, x * x, kGeluK0)).s; }

// Past |x| = 1e4 the second term is exactly 0 (s or 1 - s underflows); the clamp keeps x^2 finite.
// s: sigmoid(z), the same there as unclamped (exactly 0 or 1), so gelu(x_in) = x_in s (GeGLU's dUp).
template <bool FAST>
__device__ __forceinline__ float gelu_grad(float x_in, float& s) {
  const float x = fminf(fmaxf(x_in, -1e4f), 1e4f);
  const float x2 = x * x;
  const Sigmoid sg = sigmoid<FAST>(x * fmaf(kGeluK1, x2, kGeluK0));
  const float dz = fmaf(3.0f * kGeluK1, x2, kGeluK0);
  s = sg.s;
  // fmaxf/fminf drop a NaN input: keep it
  return x_in != x_in ? x_in : fmaf(x * sg.s, sg.s1 * dz, sg.s);
}

template <bool FAST>
__device__ __forceinline__ float gelu_grad(float x_in) {
  float s;
  return gelu_grad<FAST>(x_in, s);
}

__device__ __forceinline__ float silu_grad(float x, Sigmoid sg) { return fmaf(x * sg.s, sg.s1, sg.s); }

/** One element of op kOp; FAST: the special-function unit's exp and reciprocal (16-bit storage). */
template <int kOp, bool FAST>
__device__ __forceinline__ void apply(float a, float b, float c, float& o0, float& o1) {
  if constexpr (kOp == kGeluFwd) {
    o0 = gelu_fwd<FAST>(a);
  } else if constexpr (kOp == kGeluBwd) {
    o0 = gelu_grad<FAST>(a) * b;
  } else if constexpr (kOp == kSiluFwd) {
    o0 = a * sigmoid<FAST>(a).s;
  } else if constexpr (kOp == kSiluBwd) {
    o0 = silu_grad(a, sigmoid<FAST>(a)) * b;
  } else if constexpr (kOp == kSwiGluFwd) {
    o0 = a * sigmoid<FAST>(a).s * b;
  } else if constexpr (kOp == kSwiGluBwd) {
    const Sigmoid sg = sigmoid<FAST>(a);
    o0 = c * b * silu_grad(a, sg);
    o1 = c * (a * sg.s);
  } else if constexpr (kOp == kGeGluFwd) {
    o0 = gelu_fwd<FAST>(a) * b;
  } else {
    float s;
    o0 = c * b * gelu_grad<FAST>(a, s);
    o1 = c * (a * s);
  }
}

template <typename T, int kVec>
struct alignas(16) Pack {
  T v[kVec];
};

/**
 * in0: x or gate; in1: dOut (gelu/silu backward) or up; in2: dOut (swiglu backward);
 * out0: out, dX or dGate; out1: dUp. kVec > 1: all pointers are 16-byte aligned.
 */
template <typename T, int kOp, int kVec>
__global__ void activation_kernel(const T* in0, const T* in1, const T* in2, T* out0, T* out1, int64_t n) {
  constexpr bool kFast = !std::is_same<T, float>::value;
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  const int64_t first = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  int64_t tail = 0;
  if constexpr (kVec > 1) {
    using P = Pack<T, kVec>;
    const int64_t packs = n / kVec;
    for (int64_t p = first; p < packs; p += stride) {
      const P a = reinterpret_cast<const P*>(in0)[p];
      P b{}, c{}, o0, o1;
      if constexpr (reads_in1(kOp)) b = reinterpret_cast<const P*>(in1)[p];
      if constexpr (reads_in2(kOp)) c = reinterpret_cast<const P*>(in2)[p];
#pragma unroll
      for (int k = 0; k < kVec; k++) {
        float r0 = 0.0f, r1 = 0.0f;
        apply<kOp, kFast>(to_f32(a.v[k]), reads_in1(kOp) ? to_f32(b.v[k]) : 0.0f, reads_in2(kOp) ? to_f32(c.v[k]) : 0.0f, r0, r1);
        o0.v[k] = from_f32<T>(r0);
        if constexpr (writes_out1(kOp)) o1.v[k] = from_f32<T>(r1);
      }
      reinterpret_cast<P*>(out0)[p] = o0;
      if constexpr (writes_out1(kOp)) reinterpret_cast<P*>(out1)[p] = o1;
    }
    tail = packs * kVec;
  }
  for (int64_t i = tail + first; i < n; i += stride) {
    float r0 = 0.0f, r1 = 0.0f;
    apply<kOp, kFast>(to_f32(in0[i]), reads_in1(kOp) ? to_f32(in1[i]) : 0.0f, reads_in2(kOp) ? to_f32(in2[i]) : 0.0f, r0, r1);
    out0[i] = from_f32<T>(r0);
    if constexpr (writes_out1(kOp)) out1[i] = from_f32<T>(r1);
  }
}

/**
 * The unary backward kOp over rows of `cols`, adding dX's column sums: block (x, y) takes
 * column groups [x * 32, (x + 1) * 32) (a group: kW adjacent columns, one 16-byte vector
 * of every operand when kW > 1) of the rows of chunk y, row lane ty every 8th of them.
 * The lane sums go, in lane order, into the chunk's partial row, or with one chunk
 * (partial null) onto out.
 */
template <typename T, typename TO, int kOp, int kW>
__global__ void __launch_bounds__(kSumCols * kSumLanes) backward_col_sums_kernel(const T* x, const T* dout, T* dx, TO* out, float* partial, int64_t rows,
                                                                                 int cols, int64_t rows_per_chunk) {
  constexpr bool kFast = !std::is_same<T, float>::value;
  __shared__ float lanes[kSumLanes][kSumCols * kW + 1];
  const auto [j0, r0, r1] = column_sum_place<kW>(rows, rows_per_chunk);
  float s[kW];
#pragma unroll
  for (int e = 0; e < kW; e++) s[e] = 0.f;
  if (j0 < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumLanes) {
      const int64_t o = r * cols + j0;
      float a[kW], b[kW], y[kW];
      if constexpr (kW == 1) {
        a[0] = to_f32(x[o]);
        b[0] = to_f32(dout[o]);
      } else {
        load_group(x + o, true, a);
        load_group(dout + o, true, b);
      }
#pragma unroll
      for (int e = 0; e < kW; e++) {
        float unused = 0.f;
        apply<kOp, kFast>(a[e], b[e], 0.f, y[e], unused);
        y[e] = to_f32(from_f32<T>(y[e]));  // as stored
        s[e] += y[e];
      }
      if constexpr (kW == 1) dx[o] = from_f32<T>(y[0]);
      else store_group(dx + o, true, y);
    }
  }
  finish_column_sums<TO, kW>(lanes, s, out, partial, cols, true);
}

/** gelu/silu backward with dX's column sums added to sums (cols of them, in grad_dtype). */
template <int kOp>
void run_col_sums(const char* name, const KernelCall& c, const void* x, const void* dout, void* dx, void* sums, int64_t n, int cols, int dtype,
                  int grad_dtype) {
  const int64_t rows = n / cols;
  dispatch_float_grad(dtype, grad_dtype, name, [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using TO = decltype(grad_tag);
    constexpr int kVec = Group<T>::N;
    const bool vec = cols % kVec == 0 && is_aligned16(x) && is_aligned16(dout) && is_aligned16(dx);
    const RowChunks plan = plan_row_chunks(rows, cols, vec ? kVec : 1);
    float* partial = plan.chunks == 1 ? nullptr : static_cast<float*>(c.scratch(static_cast<size_t>(plan.chunks) * cols * sizeof(float)));
    const dim3 grid(static_cast<unsigned>(plan.col_tiles), static_cast<unsigned>(plan.chunks));
    auto go = [&](auto kernel) {
      launch(name, kernel, grid, dim3(kSumCols, kSumLanes), 0, c.stream, static_cast<const T*>(x), static_cast<const T*>(dout), static_cast<T*>(dx),
             static_cast<TO*>(sums), partial, rows, cols, plan.rows_per_chunk);
    };
    if (vec) go(backward_col_sums_kernel<T, TO, kOp, kVec>);
    else go(backward_col_sums_kernel<T, TO, kOp, 1>);
    if (partial) {
      launch_sum_chunk_partials<TO>(name, c.stream, partial, static_cast<TO*>(sums), static_cast<int>(plan.chunks), cols, true);
    }
  });
}

template <int kOp>
void run(const char* name, const KernelCall& c, const void* in0, const void* in1, const void* in2, void* out0, void* out1, int64_t n, int dtype) {
  const bool vec = is_aligned16(in0) && is_aligned16(out0) && (!reads_in1(kOp) || is_aligned16(in1)) && (!reads_in2(kOp) || is_aligned16(in2)) &&
                   (!writes_out1(kOp) || is_aligned16(out1));
  dispatch_float(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kV = 16 / sizeof(T);
    const int64_t work = vec ? (n + kV - 1) / kV : n;
    const unsigned grid = grid_stride_blocks(work, kThreads);
    auto args = [&](auto kernel) {
      launch(name, kernel, grid, kThreads, 0, c.stream, static_cast<const T*>(in0), static_cast<const T*>(in1), static_cast<const T*>(in2),
             static_cast<T*>(out0), static_cast<T*>(out1), n);
    };
    if (vec) args(activation_kernel<T, kOp, kV>);
    else args(activation_kernel<T, kOp, 1>);
  });
}

// geluForward: x, out | n, dtype
void launch_gelu_forward(const KernelCall& c) { run<kGeluFwd>("geluForward", c, c.ptr<void>(0), nullptr, nullptr, c.ptr<void>(1), nullptr, c.i64(2), c.i32(3)); }

/** gelu/silu backward: x, dOut, dX, dXColSums | n, cols, dtype, gradDtype (dXColSums'). */
template <int kOp>
void run_backward(const char* name, const KernelCall& c) {
  if (void* sums = c.ptr<void>(3)) return run_col_sums<kOp>(name, c, c.ptr<void>(0), c.ptr<void>(1), c.ptr<void>(2), sums, c.i64(4), c.i32(5), c.i32(6), c.i32(7));
  run<kOp>(name, c, c.ptr<void>(0), c.ptr<void>(1), nullptr, c.ptr<void>(2), nullptr, c.i64(4), c.i32(6));
}

void launch_gelu_backward(const KernelCall& c) { run_backward<kGeluBwd>("geluBackward", c); }

// siluForward: x, out | n, dtype
void launch_silu_forward(const KernelCall& c) { run<kSiluFwd>("siluForward", c, c.ptr<void>(0), nullptr, nullptr, c.ptr<void>(1), nullptr, c.i64(2), c.i32(3)); }

void launch_silu_backward(const KernelCall& c) { run_backward<kSiluBwd>("siluBackward", c); }

// swiGluForward: gate, up, out | n, dtype, activation (0 silu, 1 gelu)
void launch_swiglu_forward(const KernelCall& c) {
  const char* name = "swiGluForward";
  auto go = [&](auto op) { run<decltype(op)::value>(name, c, c.ptr<void>(0), c.ptr<void>(1), nullptr, c.ptr<void>(2), nullptr, c.i64(3), c.i32(4)); };
  if (c.i32(5) == kGateGelu) go(std::integral_constant<int, kGeGluFwd>{});
  else go(std::integral_constant<int, kSwiGluFwd>{});
}

// swiGluBackward: gate, up, dOut, dGate, dUp | n, dtype, activation (0 silu, 1 gelu)
void launch_swiglu_backward(const KernelCall& c) {
  const char* name = "swiGluBackward";
  auto go = [&](auto op) {
    run<decltype(op)::value>(name, c, c.ptr<void>(0), c.ptr<void>(1), c.ptr<void>(2), c.ptr<void>(3), c.ptr<void>(4), c.i64(5), c.i32(6));
  };
  if (c.i32(7) == kGateGelu) go(std::integral_constant<int, kGeGluBwd>{});
  else go(std::integral_constant<int, kSwiGluBwd>{});
}

}  // namespace

KILN_REGISTER_KERNEL("geluForward", launch_gelu_forward);
KILN_REGISTER_KERNEL("geluBackward", launch_gelu_backward);
KILN_REGISTER_KERNEL("siluForward", launch_silu_forward);
KILN_REGISTER_KERNEL("siluBackward", launch_silu_backward);
KILN_REGISTER_KERNEL("swiGluForward", launch_swiglu_forward);
KILN_REGISTER_KERNEL("swiGluBackward", launch_swiglu_backward);

}  // namespace kiln
