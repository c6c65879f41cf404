// copy.cu: copyStrided, a (batch, rows, cols) block between two strided layouts:
//   dst[b*dstBatchStride + r*dstRowStride + c] = (accumulate ? that element : 0)
//                                               + src[b*srcBatchStride + r*srcRowStride + c]
// Strides in elements, src strides may be 0 (broadcast); each row of cols elements is
// contiguous on both sides. The host checks that the dst rows are disjoint (one writer
// per dst element) and that src and dst do not overlap. A grid-stride loop over
// (row, unit), a unit being a 16-byte group when rows, strides and both bases allow it,
// else one element. Without accumulate the bits move unchanged (any NaN payload); with
// it, both values in f32, added, rounded once to the storage dtype.
#include "kiln_cuda.h"
#include "vector_io.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

struct CopyLayout {
  int64_t rows, cols;
  int64_t src_batch, src_row, dst_batch, dst_row;
};

template <typename T, bool kVec, bool kAccumulate>
__global__ void __launch_bounds__(kThreads) copy_strided_kernel(const T* src, T* dst, CopyLayout l, int64_t total) {
  constexpr int N = kVec ? Group<T>::N : 1;
  const int64_t units = l.cols / N;
  for (int64_t u = blockIdx.x * int64_t{kThreads} + threadIdx.x; u < total; u += int64_t{gridDim.x} * kThreads) {
    const int64_t i = u / units, col = (u - i * units) * N;
    const int64_t b = i / l.rows, r = i - b * l.rows;
    const T* s = src + b * l.src_batch + r * l.src_row + col;
    T* d = dst + b * l.dst_batch + r * l.dst_row + col;
    if constexpr (kAccumulate) {
      if constexpr (kVec) {
        float acc[N], v[N];
        load_group(d, true, acc);
        load_group(s, true, v);
#pragma unroll
        for (int q = 0; q < N; q++) acc[q] += v[q];
        store_group(d, true, acc);
      } else {
        d[0] = from_f32<T>(to_f32(d[0]) + to_f32(s[0]));
      }
    } else if constexpr (kVec) {
      *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
    } else {
      d[0] = s[0];
    }
  }
}

/** 16-byte groups: whole groups per row, both bases aligned and every stride a whole number of groups. */
template <typename T>
bool copy_vectorizable(const CopyLayout& l, const void* src, const void* dst) {
  constexpr int64_t N = Group<T>::N;
  return l.cols % N == 0 && l.src_batch % N == 0 && l.src_row % N == 0 && l.dst_batch % N == 0 && l.dst_row % N == 0 && is_aligned16(src) &&
         is_aligned16(dst);
}

template <typename T, bool kVec>
void launch_copy(const CopyLayout& l, int64_t batch, bool accumulate, const T* src, T* dst, cudaStream_t stream) {
  const int64_t total = batch * l.rows * (l.cols / (kVec ? Group<T>::N : 1));
  const unsigned blocks = grid_stride_blocks(total, kThreads);
  if (accumulate) launch("copyStrided", copy_strided_kernel<T, kVec, true>, blocks, kThreads, 0, stream, src, dst, l, total);
  else launch("copyStrided", copy_strided_kernel<T, kVec, false>, blocks, kThreads, 0, stream, src, dst, l, total);
}

// copyStrided: src, dst | batch, rows, cols, srcBatchStride, srcRowStride, dstBatchStride, dstRowStride, accumulate, dtype
void launch_copy_strided(const KernelCall& c) {
  const int64_t batch = c.i64(2), rows = c.i64(3);
  // A stride along a dimension of 1 is never used: 0 keeps it out of the alignment test.
  const auto batch_stride = [&](int i) { return batch == 1 ? int64_t{0} : c.i64(i); };
  const auto row_stride = [&](int i) { return rows == 1 ? int64_t{0} : c.i64(i); };
  const CopyLayout l{rows, c.i64(4), batch_stride(5), row_stride(6), batch_stride(7), row_stride(8)};
  const bool accumulate = c.flag(9);
  dispatch_float(c.i32(10), "copyStrided", [&](auto tag) {
    using T = decltype(tag);
    const T* src = c.ptr<const T>(0);
    T* dst = c.ptr<T>(1);
    if (copy_vectorizable<T>(l, src, dst)) launch_copy<T, true>(l, batch, accumulate, src, dst, c.stream);
    else launch_copy<T, false>(l, batch, accumulate, src, dst, c.stream);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("copyStrided", launch_copy_strided);

}  // namespace kiln
