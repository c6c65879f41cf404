// Reading a matmul call out of the WebAssembly memory: the argument block the host wrote
// (MatmulArgs in csrc/matmul_gemm.h, written by src/matmul-call.ts) decoded into a
// MatmulCall, every operand checked to lie inside the memory.
#ifndef KILN_NATIVE_MATMUL_ARGS_H
#define KILN_NATIVE_MATMUL_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "matmul_call.h"

namespace kiln_native {

/* Bytes of the argument block (ARGS_BLOCK_BYTES in src/kernel-runtime.ts). */
constexpr uint32_t kArgsBlockBytes = 256;

/*
 * Decodes the block at byte offset args_ptr of the memory [base, base + bytes) for A, B and
 * bias in dtype dt. Returns an empty string, or what is wrong (then *call is not usable).
 */
std::string decode_matmul(uint8_t* base, size_t bytes, uint32_t args_ptr, int32_t dt, MatmulCall* call);

}  // namespace kiln_native

#endif
