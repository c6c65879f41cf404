#include "activation_args.h"

#include <string.h>

#include "matmul_args.h"
#include "matmul_call.h"

namespace kiln_native {

namespace {

/* Word indices of ActivationArgs (csrc/activation.c; FIELD in src/backend-activation.ts). */
enum Word : uint32_t { kN = 0, kDtype = 1, kIn0 = 2, kIn1 = 3, kOut0 = 5 };

}  // namespace

std::string decode_activation(uint8_t* base, size_t bytes, uint32_t args_ptr, bool backward, ActivationCall* call) {
  if (args_ptr % 64 != 0 || (uint64_t)args_ptr + kArgsBlockBytes > bytes) {
    return "the argument block at " + std::to_string(args_ptr) + " is not a 64-byte aligned block inside the memory";
  }
  uint32_t w[8];
  memcpy(w, base + args_ptr, sizeof w);
  if (w[kN] > 0x7fffffffu) return "n is past 2^31 - 1";
  const int32_t dt = (int32_t)w[kDtype];
  if (dt != kF32 && dt != kBf16 && dt != kF16) return "unknown dtype code " + std::to_string(dt);
  const uint64_t span = (uint64_t)w[kN] * (dt == kF32 ? 4 : 2);
  struct Operand {
    const char* name;
    uint32_t word;
    bool used;
  } operands[] = {{"x", kIn0, true}, {"dOut", kIn1, backward}, {"out", kOut0, true}};
  for (const Operand& o : operands) {
    if (o.used && (uint64_t)w[o.word] + span > bytes) {
      return std::string("gelu ") + o.name + " (" + std::to_string(span) + " bytes at " + std::to_string(w[o.word]) + ") runs past the end of the memory";
    }
  }
  call->n = w[kN];
  call->dt = dt;
  call->x = base + w[kIn0];
  call->d_out = backward ? base + w[kIn1] : nullptr;
  call->out = base + w[kOut0];
  return std::string();
}

}  // namespace kiln_native
