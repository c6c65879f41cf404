// rope.cu: rotary position embedding, "rotate half" pairing, forward and backward,
// in f32 / bf16 / f16 storage with f32 arithmetic.
//
// x and out are (batch, seqLen, heads, headDim), token rows row_stride elements
// apart (a row's heads contiguous, head h at h * headDim). For the token row r,
// position p = posOffset + r % seqLen (minus docStarts[r] in packed rows: each document's
// tokens count from 0), and i < half = headDim / 2:
//   a_i = sign * p * inv_freq[i],   inv_freq[i] = theta^(-2i/headDim), then scaled
// (the contract's ropeInvFreq: linear divides by factor; llama3 keeps wavelengths
// 2 pi / f below L / high, divides those above L / low by factor, blends between).
//   out[i]      = x[i] cos a_i - x[i+half] sin a_i
//   out[i+half] = x[i+half] cos a_i + x[i] sin a_i
// sign = +1 forward, -1 backward (the inverse rotation maps dOut to dX).
//
// Angles: a first kernel writes inv_freq in f64 (pow) into scratch. The rotation
// kernel forms p * inv_freq[i] in f64 and reduces it by the nearest multiple k of
// pi/2 with two fused multiply-adds (pi/2 split in two doubles: exact to ~1e-16
// absolute for any realistic k), then takes sincosf of the reduced f32 angle in
// [-pi/4, pi/4] and undoes the quadrant: positions in the millions keep f32 accuracy.
//
// One block per token row (grid-stride over rows). Frequencies are taken in groups
// of kThreads: each thread computes one cos/sin into shared memory, then the block
// rotates that group's pairs for every head (consecutive threads, consecutive i:
// coalesced). out may alias x: each pair (i, i+half) is read and written by the same
// thread. Only the heads * headDim elements of each row are touched.
#include <cmath>

#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 128;

constexpr double kTwoOverPi = 0.63661977236758134308;
constexpr double kPio2Hi = 1.5707963267948966192e+00;  // nearest double to pi/2
constexpr double kPio2Lo = 6.1232339957367660359e-17;  // pi/2 - kPio2Hi

/** rope_scaling: kind 0 none, 1 linear, 2 llama3 (low / high frequency factors, original positions L). */
struct RopeScaling {
  int kind;
  double factor, low, high, original;
};

constexpr double kTwoPi = 6.28318530717958647692;

__global__ void __launch_bounds__(kThreads) rope_freq_kernel(double* inv_freq, int half, int head_dim, double theta, RopeScaling sc) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= half) return;
  const double f = pow(theta, (-2.0 * i) / head_dim);
  double scaled = f;
  if (sc.kind == 1) {
    scaled = f / sc.factor;
  } else if (sc.kind == 2) {
    const double wavelength = kTwoPi / f;
    if (wavelength > sc.original / sc.low) {
      scaled = f / sc.factor;
    } else if (!(wavelength < sc.original / sc.high)) {
      const double s = (sc.original / wavelength - sc.low) / (sc.high - sc.low);
      scaled = (1.0 - s) * f / sc.factor + s * f;
    }
  }
  inv_freq[i] = scaled;
}

/** cos and sin of a (f64 angle, any magnitude up to ~1e15), rounded to f32. */
__device__ __forceinline__ void cos_sin(double a, float& c, float& s) {
  const double k = rint(a * kTwoOverPi);
  double r = fma(-k, kPio2Hi, a);
  r = fma(-k, kPio2Lo, r);
  const float rf = static_cast<float>(r);
  float sr, cr;
#if defined(KILN_CUDA_SIM)
  sr = sinf(rf);
  cr = cosf(rf);
#else
  sincosf(rf, &sr, &cr);
#endif
  switch (static_cast<int>(static_cast<long long>(k) & 3)) {
    case 0: c = cr; s = sr; break;
    case 1: c = -sr; s = cr; break;
    case 2: c = -cr; s = -sr; break;
    default: c = sr; s = -cr; break;
  }
}

template <typename T, bool kBackward>
__global__ void __launch_bounds__(kThreads) rope_kernel(const T* x, T* out, const double* inv_freq, int64_t rows, int64_t seq_len, int heads,
                                                        int head_dim, int64_t row_stride, double pos_offset, const int* __restrict__ doc_starts) {
  __shared__ float cs[kThreads];
  __shared__ float sn[kThreads];
  const int half = head_dim / 2;
  const int tid = threadIdx.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const double pos = pos_offset + static_cast<double>(row % seq_len) - (doc_starts ? static_cast<double>(doc_starts[row]) : 0.0);
    const int64_t base = row * row_stride;
    for (int f0 = 0; f0 < half; f0 += kThreads) {
      const int nf = min(kThreads, half - f0);
      if (tid < nf) {
        float c, s;
        cos_sin(pos * inv_freq[f0 + tid], c, s);
        cs[tid] = c;
        sn[tid] = kBackward ? -s : s;
      }
      __syncthreads();
      const int pairs = heads * nf;
      for (int idx = tid; idx < pairs; idx += kThreads) {
        const int h = idx / nf;
        const int i = idx - h * nf;
        const int64_t p = base + int64_t{h} * head_dim + f0 + i;
        const float c = cs[i], s = sn[i];
        const float x0 = to_f32(x[p]), x1 = to_f32(x[p + half]);
        out[p] = from_f32<T>(x0 * c - x1 * s);
        out[p + half] = from_f32<T>(fmaf(x0, s, x1 * c));
      }
      __syncthreads();
    }
  }
}

template <bool kBackward>
void run(const char* name, const KernelCall& c) {
  const int* doc_starts = c.ptr<const int>(2);  // null without packed rows
  const int64_t batch = c.i64(3), seq_len = c.i64(4);
  const int heads = c.i32(5), head_dim = c.i32(6);
  const int64_t row_stride = c.i64(7);
  const double pos_offset = c.at(8), theta = c.at(9);
  const RopeScaling scaling{c.i32(11), c.at(12), c.at(13), c.at(14), c.at(15)};
  const int half = head_dim / 2;
  const int64_t rows = batch * seq_len;
  const unsigned grid = static_cast<unsigned>(rows < 65535 * 8 ? rows : 65535 * 8);
  dispatch_float(c.i32(10), name, [&](auto tag) {
    using T = decltype(tag);
    double* inv_freq = static_cast<double*>(c.scratch(sizeof(double) * static_cast<size_t>(half)));
    launch(name, rope_freq_kernel, ceil_div(half, kThreads), kThreads, 0, c.stream, inv_freq, half, head_dim, theta, scaling);
    launch(name, rope_kernel<T, kBackward>, grid, kThreads, 0, c.stream, c.ptr<const T>(0), c.ptr<T>(1), static_cast<const double*>(inv_freq), rows,
           seq_len, heads, head_dim, row_stride, pos_offset, doc_starts);
  });
}

// ropeForward: x, out, docStarts | batch, seqLen, heads, headDim, rowStride, posOffset, theta, dtype, scaling kind, factor, low, high, original
void launch_rope_forward(const KernelCall& c) { run<false>("ropeForward", c); }

// ropeBackward: the same as ropeForward
void launch_rope_backward(const KernelCall& c) { run<true>("ropeBackward", c); }

}  // namespace

KILN_REGISTER_KERNEL("ropeForward", launch_rope_forward);
KILN_REGISTER_KERNEL("ropeBackward", launch_rope_backward);

}  // namespace kiln
