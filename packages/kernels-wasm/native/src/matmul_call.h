// The contract's matmul as the native kernels receive it: one call, decoded and
// bounds-checked by matmul_args.cc from the argument block the host wrote into
// the WebAssembly memory (MatmulArgs in csrc/matmul_gemm.h), with every operand
// turned into a pointer into that memory.
//
//   for each batch item i:  C_i = (accumulate ? C_i : 0) + alpha * op(A_i) @ op(B_i) + bias
//
// Row-major. op(A) is (m, k): A stored (m, k), or (k, m) when trans_a, its stored
// rows lda elements apart. op(B) is (k, n): B stored (k, n), or (n, k) when
// trans_b. C is (m, n). Batch item i starts i * stride_* elements in (0
// broadcasts). A, B and bias are in `dt`; C is in `ct` (dt, or f32 for 16-bit dt).
//
// Only plain data here: this header is included by translation units compiled for
// different instruction sets, which must share no inline code.
#ifndef KILN_NATIVE_MATMUL_CALL_H
#define KILN_NATIVE_MATMUL_CALL_H

#include <stdint.h>

#include "activation_call.h"
#include "attention_call.h"
#include "cross_entropy_call.h"
#include "norm_call.h"

namespace kiln_native {

// Storage dtype codes, as csrc/kiln_storage.h and src/storage-dtype.ts number them.
enum DType : int32_t { kF32 = 0, kBf16 = 1, kF16 = 2 };

struct MatmulCall {
  int32_t m, n, k, batch;
  const uint8_t* a;
  const uint8_t* b;
  uint8_t* c;
  const uint8_t* bias;  // nullptr: no bias
  int64_t stride_a, stride_b, stride_c;  // elements
  int32_t lda;
  bool trans_a, trans_b, accumulate;
  float alpha;
  int32_t dt, ct;
  // Batch items handed out so far (the argument block's `tickets` word, zeroed by the host):
  // the threads of one call draw whole items from it when there are enough to go round.
  uint32_t* tickets;
};

// One instruction set's kernels (gemm_avx512.cc, gemm_avx2.cc, gemm_neon.cc).
struct IsaKernels {
  const char* name;
  int32_t mr, nr, kc;  // register tile and k block of the GEMM
  // Part `part` of `parts` of the call, run by any thread; every part once, in any order,
  // on any threads: C is the same bits whatever the split.
  void (*matmul)(const MatmulCall& call, int part, int parts);
  // Register-only fused multiply-adds, `iterations` rounds; returns a value that depends on
  // every lane so the loop stays live. Flops = iterations * ceiling_flops_per_iteration.
  float (*ceiling)(int64_t iterations);
  int64_t ceiling_flops_per_iteration;
  // The GEMM's own conversions, for tests: 16-bit dt <-> f32, n elements.
  void (*widen)(const uint16_t* in, float* out, int64_t n, int32_t dt);
  void (*narrow)(const float* in, uint16_t* out, int64_t n, int32_t dt);
  // Allocates the calling thread's buffers, so that its first call does not.
  void (*prepare_thread)();
  // Attention forward / backward (nest_attention.h): every part draws work units from the
  // call's counter until none is left; each unit's results have one writer and a fixed sum
  // order, so the bits do not depend on the parts or the threads.
  void (*attention_forward)(const AttentionCall& call, int part, int parts);
  void (*attention_backward)(const AttentionCall& call, int part, int parts);
  // GELU forward / backward (nest_activation.h): a fixed share of the elements per part.
  void (*gelu_forward)(const ActivationCall& call, int part, int parts);
  void (*gelu_backward)(const ActivationCall& call, int part, int parts);
  // LayerNorm / RMSNorm forward (rows split among the parts) and the backward's rows pass
  // (nest_norm.h: its partials drawn from the call's counter).
  void (*norm_forward)(const NormCall& call, int part, int parts);
  void (*norm_backward)(const NormCall& call, int part, int parts);
  // Cross-entropy forward, forward-backward or backward, the call's mode (nest_cross_entropy.h):
  // a fixed share of the rows per part.
  void (*cross_entropy)(const CrossEntropyCall& call, int part, int parts);
};

#if defined(__x86_64__) || defined(_M_X64)
const IsaKernels& avx512_kernels();
const IsaKernels& avx2_kernels();
#elif defined(__aarch64__)
const IsaKernels& neon_kernels();
#endif

}  // namespace kiln_native

#endif
