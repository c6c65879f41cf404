// Reading a cross-entropy call out of the WebAssembly memory: CrossEntropyArgs of
// csrc/cross_entropy.c decoded into a CrossEntropyCall, every operand checked to lie inside
// the memory.
#ifndef KILN_NATIVE_CROSS_ENTROPY_ARGS_H
#define KILN_NATIVE_CROSS_ENTROPY_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "cross_entropy_call.h"

namespace kiln_native {

/* Decodes the block at args_ptr for `mode`; an empty string, or what is wrong. */
std::string decode_cross_entropy(uint8_t* base, size_t bytes, uint32_t args_ptr, CrossEntropyMode mode, CrossEntropyCall* call);

}  // namespace kiln_native

#endif
