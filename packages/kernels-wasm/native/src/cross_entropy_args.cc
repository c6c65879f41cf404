#include "cross_entropy_args.h"

#include <string.h>

#include "matmul_args.h"
#include "matmul_call.h"

namespace kiln_native {

namespace {

/* Word indices of CrossEntropyArgs (csrc/cross_entropy.c; FIELD in src/backend-cross-entropy.ts). */
enum Word : uint32_t { kLogits = 0, kTargets = 1, kLosses = 2, kLse = 3, kDLogits = 4, kRows = 5, kVocab = 6, kDtype = 7, kScale = 8 };

}  // namespace

std::string decode_cross_entropy(uint8_t* base, size_t bytes, uint32_t args_ptr, CrossEntropyMode mode, CrossEntropyCall* call) {
  if (args_ptr % 64 != 0 || (uint64_t)args_ptr + kArgsBlockBytes > bytes) {
    return "the argument block at " + std::to_string(args_ptr) + " is not a 64-byte aligned block inside the memory";
  }
  uint32_t w[16];
  memcpy(w, base + args_ptr, sizeof w);
  if (w[kRows] == 0 || w[kVocab] == 0 || w[kRows] > 0x7fffffffu || w[kVocab] > 0x7fffffffu) return "rows and vocab must be in 1 .. 2^31 - 1";
  CrossEntropyCall c{};
  c.rows = (int32_t)w[kRows];
  c.vocab = (int32_t)w[kVocab];
  c.dt = (int32_t)w[kDtype];
  c.mode = mode;
  if (c.dt != kF32 && c.dt != kBf16 && c.dt != kF16) return "unknown dtype code " + std::to_string(c.dt);
  memcpy(&c.scale, &w[kScale], 4);
  const uint64_t matrix = (uint64_t)c.rows * (uint64_t)c.vocab * (c.dt == kF32 ? 4 : 2), stats = (uint64_t)c.rows * 4;
  const bool forward = mode != kCrossEntropyBackward, backward = mode != kCrossEntropyForward;
  struct Operand {
    const char* name;
    uint32_t word;
    uint64_t bytes;
    bool used, word_aligned;  // word_aligned: i32 or f32, one per row
  } operands[] = {{"logits", kLogits, matrix, true, false},
                  {"targets", kTargets, stats, true, true},
                  {"losses", kLosses, stats, forward, true},
                  {"lse", kLse, stats, true, true},
                  {"dLogits", kDLogits, matrix, backward, false}};
  for (const Operand& o : operands) {
    if (o.used && (uint64_t)w[o.word] + o.bytes > bytes) {
      return std::string(o.name) + " (" + std::to_string(o.bytes) + " bytes at " + std::to_string(w[o.word]) + ") runs past the end of the memory";
    }
    if (o.used && o.word_aligned && w[o.word] % 4) return std::string(o.name) + " is not 4-byte aligned";
  }
  c.logits = base + w[kLogits];
  c.targets = (const int32_t*)(base + w[kTargets]);
  c.losses = forward ? (float*)(base + w[kLosses]) : nullptr;
  c.lse = (float*)(base + w[kLse]);
  c.d_logits = backward ? base + w[kDLogits] : nullptr;
  *call = c;
  return std::string();
}

}  // namespace kiln_native
