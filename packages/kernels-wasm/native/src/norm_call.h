// The contract's LayerNorm and RMSNorm as the native kernels receive them, decoded and
// bounds-checked by norm_args.cc from the argument blocks the host wrote (NormForwardArgs
// and NormBackwardArgs of csrc/norm.c, written by src/backend-norm.ts). x, out, dOut, dX,
// residual, sum, dResidual are (rows, dim) in dt; weight, bias (dim) in dt; mean, rstd f32.
//   forward:  mean = sum_j x_j / dim (0 for rmsNorm);  rstd = 1 / sqrt(sum_j (x_j - mean)^2 / dim + eps)
//             out_j = (x_j - mean) rstd (w_j + weight_offset) (+ b_j); with a residual, x is
//             first replaced by sum = x + residual (rounded to dt, and written)
//   backward: xhat = (x - mean) rstd, g = dOut (w + weight_offset)
//             dX = dResidual + rstd (g - mean(g) - xhat mean(g xhat))   (rmsNorm: no mean(g))
//             partial p's rows of f32 sums: dWeight += dOut xhat, dBias += dOut, dX's column sums
// The backward leaves its parameter sums in `partials` f32 rows of scratch (`stride` floats
// apart: dWeight at 0, dBias at dim4, dX sums at 2 dim4, dim4 = dim rounded up to 4);
// csrc/norm.c's kiln_norm_param_grad_reduce adds them to the outputs in partial order.
// Only plain data here (see matmul_call.h).
#ifndef KILN_NATIVE_NORM_CALL_H
#define KILN_NATIVE_NORM_CALL_H

#include <stdint.h>

namespace kiln_native {

struct NormCall {
  int32_t rows, dim, dt;
  bool layer;  // LayerNorm, else RMSNorm
  float eps, weight_offset;
  const uint8_t* x;
  const uint8_t* weight;
  const uint8_t* bias;  // nullptr: none
  float* mean;          // nullptr for rmsNorm
  float* rstd;
  // forward
  uint8_t* out;
  const uint8_t* residual;  // nullptr: normalize x
  uint8_t* sum;
  // backward
  const uint8_t* d_out;
  uint8_t* d_x;
  const uint8_t* d_res;  // nullptr: none
  bool d_bias, d_x_sums;
  float* scratch;
  int64_t stride;  // floats between partial rows
  int32_t partials;
  // Partials handed out so far (the block's word 32, zeroed by the host).
  uint32_t* tickets;
};

}  // namespace kiln_native

#endif
