// Reading a GELU call out of the WebAssembly memory: ActivationArgs of csrc/activation.c
// decoded into an ActivationCall, every operand checked to lie inside the memory.
#ifndef KILN_NATIVE_ACTIVATION_ARGS_H
#define KILN_NATIVE_ACTIVATION_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <string>

#include "activation_call.h"

namespace kiln_native {

/* Decodes the block at args_ptr (reading dOut when `backward`); an empty string, or what is wrong. */
std::string decode_activation(uint8_t* base, size_t bytes, uint32_t args_ptr, bool backward, ActivationCall* call);

}  // namespace kiln_native

#endif
