#include "attention_args.h"

#include <string.h>

#include "matmul_args.h"
#include "matmul_call.h"

namespace kiln_native {

namespace {

/* Word indices of the native attention block (WORD in src/attention-dispatch.ts). */
enum Word : uint32_t {
  kBatch = 0, kSeqLen = 1, kHeads = 2, kKvHeads = 3, kHeadDim = 4, kVHeadDim = 5,
  kQStride = 6, kKvStride = 7, kVStride = 8, kOutStride = 9, kScale = 10, kWindow = 11, kDtype = 12,
  kQ = 13, kK = 14, kV = 15, kOut = 16, kLse = 17, kDOut = 18, kDQ = 19, kDK = 20, kDV = 21, kTickets = 32,
};

constexpr uint32_t kInt32Max = 0x7fffffffu;

/* Elements `rows` rows of `width` elements span, rows `stride` apart. */
uint64_t span(uint64_t rows, uint64_t width, uint64_t stride) { return rows == 0 ? 0 : (rows - 1) * stride + width; }

}  // namespace

std::string decode_attention(uint8_t* base, size_t bytes, uint32_t args_ptr, bool backward, AttentionCall* call) {
  if (args_ptr % 64 != 0 || (uint64_t)args_ptr + kArgsBlockBytes > bytes) {
    return "the argument block at " + std::to_string(args_ptr) + " is not a 64-byte aligned block inside the memory";
  }
  uint32_t w[kArgsBlockBytes / 4];
  memcpy(w, base + args_ptr, sizeof w);
  for (uint32_t i : {kBatch, kSeqLen, kHeads, kKvHeads, kHeadDim, kVHeadDim, kQStride, kKvStride, kVStride, kOutStride, kWindow}) {
    if (w[i] > kInt32Max) return "argument word " + std::to_string(i) + " is past 2^31 - 1";
  }
  for (uint32_t i : {kBatch, kSeqLen, kHeads, kKvHeads, kHeadDim, kVHeadDim, kWindow}) {
    if (w[i] == 0) return "argument word " + std::to_string(i) + " must be positive";
  }
  AttentionCall a{};
  a.batch = (int32_t)w[kBatch];
  a.seq_len = (int32_t)w[kSeqLen];
  a.heads = (int32_t)w[kHeads];
  a.kv_heads = (int32_t)w[kKvHeads];
  a.head_dim = (int32_t)w[kHeadDim];
  a.v_head_dim = (int32_t)w[kVHeadDim];
  a.q_stride = w[kQStride];
  a.kv_stride = w[kKvStride];
  a.v_stride = w[kVStride];
  a.out_stride = w[kOutStride];
  memcpy(&a.scale, &w[kScale], 4);
  a.window = (int32_t)w[kWindow];
  a.dt = (int32_t)w[kDtype];
  if (a.dt != kF32 && a.dt != kBf16 && a.dt != kF16) return "unknown dtype code " + std::to_string(a.dt);
  if (a.heads % a.kv_heads != 0) return "heads must be a multiple of kvHeads";
  if (a.window > a.seq_len) return "window is longer than seqLen";
  const uint64_t rows = (uint64_t)a.batch * (uint64_t)a.seq_len, eb = a.dt == kF32 ? 4 : 2;
  const uint64_t qw = (uint64_t)a.heads * a.head_dim, kw = (uint64_t)a.kv_heads * a.head_dim;
  const uint64_t vw = (uint64_t)a.kv_heads * a.v_head_dim, ow = (uint64_t)a.heads * a.v_head_dim;
  if ((uint64_t)a.q_stride < qw || (uint64_t)a.kv_stride < kw || (uint64_t)a.v_stride < vw || (uint64_t)a.out_stride < ow) {
    return "a row stride is shorter than its row";
  }
  struct Operand {
    const char* name;
    uint32_t word;
    uint64_t bytes;
    bool used;
  } operands[] = {
      {"q", kQ, span(rows, qw, a.q_stride) * eb, true},
      {"k", kK, span(rows, kw, a.kv_stride) * eb, true},
      {"v", kV, span(rows, vw, a.v_stride) * eb, true},
      {"out", kOut, span(rows, ow, a.out_stride) * eb, true},
      {"lse", kLse, rows * a.heads * 4, true},
      {"dOut", kDOut, span(rows, ow, a.out_stride) * eb, backward},
      {"dQ", kDQ, span(rows, qw, a.q_stride) * eb, backward},
      {"dK", kDK, span(rows, kw, a.kv_stride) * eb, backward},
      {"dV", kDV, span(rows, vw, a.v_stride) * eb, backward},
  };
  for (const Operand& o : operands) {
    if (o.used && (uint64_t)w[o.word] + o.bytes > bytes) {
      return std::string("attention ") + o.name + " (" + std::to_string(o.bytes) + " bytes at " + std::to_string(w[o.word]) +
             ") runs past the end of the memory (" + std::to_string(bytes) + " bytes)";
    }
  }
  if (w[kLse] % 4 != 0) return "lse is not 4-byte aligned";
  a.q = base + w[kQ];
  a.k = base + w[kK];
  a.v = base + w[kV];
  a.out = base + w[kOut];
  a.lse = (float*)(base + w[kLse]);
  a.d_out = backward ? base + w[kDOut] : nullptr;
  a.d_q = backward ? base + w[kDQ] : nullptr;
  a.d_k = backward ? base + w[kDK] : nullptr;
  a.d_v = backward ? base + w[kDV] : nullptr;
  a.tickets = (uint32_t*)(base + args_ptr + 4 * kTickets);
  *call = a;
  return std::string();
}

}  // namespace kiln_native
