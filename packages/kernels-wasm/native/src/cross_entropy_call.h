// The contract's fused softmax + cross-entropy as the native kernels receive it, decoded and
// bounds-checked by cross_entropy_args.cc from the argument block the host wrote
// (CrossEntropyArgs of csrc/cross_entropy.c, written by src/backend-cross-entropy.ts):
//   forward   lse[r] = log sum_j exp(logits[r,j]),  losses[r] = lse[r] - logits[r, t_r]
//             (0 when t_r < 0)
//   backward  dLogits[r,j] = scale (exp(logits[r,j] - lse[r]) - [j == t_r])  (a zero row when t_r < 0)
// logits and dLogits are (rows, vocab) in dtype dt (dLogits may be logits itself); targets
// i32, losses and lse f32, one per row. Only plain data here (see matmul_call.h).
#ifndef KILN_NATIVE_CROSS_ENTROPY_CALL_H
#define KILN_NATIVE_CROSS_ENTROPY_CALL_H

#include <stdint.h>

namespace kiln_native {

enum CrossEntropyMode : int32_t { kCrossEntropyForward = 0, kCrossEntropyForwardBackward = 1, kCrossEntropyBackward = 2 };

struct CrossEntropyCall {
  int32_t rows, vocab, dt, mode;
  const uint8_t* logits;
  const int32_t* targets;
  float* losses;  // forward only
  float* lse;     // written by the forward, read by the backward
  uint8_t* d_logits;  // the backward only (nullptr in a plain forward)
  float scale;
};

}  // namespace kiln_native

#endif
