// grouped_matmul_tc.h: what grouped_matmul.cu (the launchers) and grouped_matmul_tc.cu
// (the tensor-core kernels for bf16 / f16) share.
#pragma once
#include "kiln_cuda.h"

namespace kiln {

/** A grouped matmul call's sizes: A (rows, k), C (rows, n), `groups` matrices B_g / dB_g. */
struct GroupedDims {
  int rows, n, k, groups;
  bool trans_b, accumulate;
};

/** 128 x 128 tiles for groupedMatmul: groups average at least 128 rows and there are enough tiles to fill a GPU. */
inline bool grouped_big_tiles(const GroupedDims& d) {
  const int64_t tiles128 = (int64_t{d.rows} + 127) / 128 * ((int64_t{d.n} + 127) / 128);
  return int64_t{d.rows} >= int64_t{128} * d.groups && tiles128 >= 128;
}

/** 128 x 128 tiles for groupedMatmulWeightGrad: enough (n, k) tiles over all groups to fill a GPU. */
inline bool weight_grad_big_tiles(const GroupedDims& d) { return (int64_t{d.n} + 127) / 128 * ((int64_t{d.k} + 127) / 128) * d.groups >= 128; }

/** groupedMatmul / groupedMatmulWeightGrad on tensor cores; dtype bf16 or f16; dB in grad_dtype (dtype or f32). */
void grouped_matmul_tc(const KernelCall& c, const GroupedDims& d, int dtype);
void grouped_weight_grad_tc(const KernelCall& c, const GroupedDims& d, int dtype, int grad_dtype);

}  // namespace kiln
