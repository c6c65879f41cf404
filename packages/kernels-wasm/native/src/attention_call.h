// The contract's attention as the native kernels receive it: one forward or backward call,
// decoded and bounds-checked by attention_args.cc from the argument block the host wrote
// into the WebAssembly memory (src/attention-dispatch.ts), every operand a pointer into it.
//
// Causal (optionally sliding-window) attention, query head h reading kv head h / group:
//   s[t,u] = scale q[t]·k[u] for t - W < u <= t;  p = softmax_u(s);  out[t] = sum_u p[t,u] v[u]
//   lse[t] = log sum_u exp(s[t,u])
// Backward, with D[t] = dOut[t]·out[t] and p = exp(s - lse):
//   dP = dOut v^T;  dS = p (dP - D);  dQ = scale dS k;  dK = scale dS^T q;  dV = p^T dOut
// Row (b*T + t) of q / dQ holds head h at [h*D, h*D + D), of k / dK kv head g at
// [g*D, ...), of v / dV at [g*DV, ...), of out / dOut head h at [h*DV, ...); rows the
// given strides apart (elements). lse is f32 (batch, heads, T). The others are in `dt`.
//
// Only plain data here (see matmul_call.h).
#ifndef KILN_NATIVE_ATTENTION_CALL_H
#define KILN_NATIVE_ATTENTION_CALL_H

#include <stdint.h>

namespace kiln_native {

struct AttentionCall {
  int32_t batch, seq_len, heads, kv_heads, head_dim, v_head_dim;
  int64_t q_stride, kv_stride, v_stride, out_stride;  // elements between rows
  float scale;
  int32_t window;  // keys each query sees, 1..seq_len
  int32_t dt;
  const uint8_t* q;
  const uint8_t* k;
  const uint8_t* v;
  uint8_t* out;       // forward: written; backward: read
  float* lse;         // forward: written; backward: read
  const uint8_t* d_out;  // backward only (nullptr in the forward)
  uint8_t* d_q;
  uint8_t* d_k;
  uint8_t* d_v;
  // Work units handed out so far (the block's `tickets` word, zeroed by the host): forward
  // units are (b, h, block of queries), backward ones (b, kv head); each one thread's.
  uint32_t* tickets;
};

}  // namespace kiln_native

#endif
