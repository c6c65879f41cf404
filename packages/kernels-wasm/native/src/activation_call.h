// The contract's GELU forward and backward as the native kernels receive them, decoded and
// bounds-checked by activation_args.cc from the argument block the host wrote
// (ActivationArgs of csrc/activation.c, written by src/backend-activation.ts):
//   forward:  out = gelu(x) = x sigmoid(z),  z = 2 sqrt(2/pi) (x + 0.044715 x^3)  (tanh form)
//   backward: dX = dOut gelu'(x),  gelu'(x) = s + x s (1 - s) z'(x),  s = sigmoid(z)
// n contiguous elements of dtype dt each; out (dX) may be x (dOut) itself.
// Only plain data here (see matmul_call.h).
#ifndef KILN_NATIVE_ACTIVATION_CALL_H
#define KILN_NATIVE_ACTIVATION_CALL_H

#include <stdint.h>

namespace kiln_native {

struct ActivationCall {
  int64_t n;
  int32_t dt;
  const uint8_t* x;
  const uint8_t* d_out;  // backward only (nullptr in the forward)
  uint8_t* out;          // out, or dX
};

}  // namespace kiln_native

#endif
