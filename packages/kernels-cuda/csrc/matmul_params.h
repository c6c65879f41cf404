// matmul_params.h: a dense matmul call as the kernels of matmul.cu and matmul_mma.cu
// take it (the semantics: matmul.cu's header), and the entry to matmul_mma.cu.
#pragma once
#include <cstdint>

#include "kiln_cuda.h"

namespace kiln {

/** T: storage of A, B and bias; TC: storage of C (T, or f32 for 16-bit T). */
template <typename T, typename TC = T>
struct MatmulParams {
  const T* a;
  const T* b;
  const T* bias;  // nullptr: no bias
  TC* c;
  int m, n, k;
  int64_t batch;
  int64_t lda;  // elements between A's stored rows: k, or m when trans_a, or more
  int64_t stride_a, stride_b, stride_c;
  float alpha;
  bool trans_a, trans_b, accumulate;
};

/**
 * Runs a bf16 / f16 matmul on matmul_mma.cu's pipelined tensor-core kernel (T
 * __nv_bfloat16 or __half; TC T or float). False, with nothing launched, when an
 * operand does not allow its 16-byte copies (a base not 16-byte aligned, or a
 * leading dimension (A's lda) or batch stride not a multiple of 8 elements).
 */
template <typename T, typename TC>
bool launch_matmul_mma(const MatmulParams<T, TC>& p, MatmulTiles tiles, cudaStream_t stream);

/**
 * The same on matmul_wgmma.cu's kernel (wgmma, sm_90a only: the caller checks the
 * device), with the same refusal.
 */
template <typename T, typename TC>
bool launch_matmul_wgmma(const MatmulParams<T, TC>& p, MatmulTiles tiles, cudaStream_t stream);

}  // namespace kiln
