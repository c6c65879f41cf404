// Reading an attention call out of the WebAssembly memory: the argument block
// src/attention-dispatch.ts wrote, decoded into an AttentionCall, every operand checked to
// lie inside the memory.
#ifndef KILN_NATIVE_ATTENTION_ARGS_H
#define KILN_NATIVE_ATTENTION_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "attention_call.h"

namespace kiln_native {

/*
 * Decodes the block at byte offset args_ptr of the memory [base, base + bytes), for the
 * backward when `backward`. Returns an empty string, or what is wrong (then *call is not usable).
 */
std::string decode_attention(uint8_t* base, size_t bytes, uint32_t args_ptr, bool backward, AttentionCall* call);

}  // namespace kiln_native

#endif
