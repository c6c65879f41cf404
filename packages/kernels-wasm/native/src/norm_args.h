// Reading a LayerNorm / RMSNorm call out of the WebAssembly memory: NormForwardArgs or
// NormBackwardArgs of csrc/norm.c decoded into a NormCall, every operand checked to lie
// inside the memory.
#ifndef KILN_NATIVE_NORM_ARGS_H
#define KILN_NATIVE_NORM_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "norm_call.h"

namespace kiln_native {

/* Decodes the block at args_ptr; an empty string, or what is wrong. */
std::string decode_norm(uint8_t* base, size_t bytes, uint32_t args_ptr, bool backward, bool layer, NormCall* call);

}  // namespace kiln_native

#endif
