#include "matmul_args.h"

#include <string.h>

namespace kiln_native {

namespace {

/* Word indices of MatmulArgs (csrc/matmul_gemm.h; FIELD in src/matmul-call.ts). */
enum Word : uint32_t {
  kM = 0, kN = 1, kK = 2, kBatch = 3, kA = 4, kB = 5, kC = 6, kBias = 7,
  kStrideA = 8, kStrideB = 9, kStrideC = 10, kTransA = 11, kTransB = 12, kAccumulate = 13,
  kAlpha = 14, kCF32 = 17, kLda = 21, kTickets = 32,
};

constexpr uint32_t kInt32Max = 0x7fffffffu;

/* Elements a batch of `batch` matrices spans: rows x cols each, rows `ld` apart, items `stride` apart. */
uint64_t span(uint64_t batch, uint64_t rows, uint64_t cols, uint64_t ld, uint64_t stride) {
  if (batch == 0 || rows == 0 || cols == 0) return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

}  // namespace

std::string decode_matmul(uint8_t* base, size_t bytes, uint32_t args_ptr, int32_t dt, MatmulCall* call) {
  if (dt != kF32 && dt != kBf16 && dt != kF16) return "unknown dtype code " + std::to_string(dt);
  if (args_ptr % 64 != 0 || (uint64_t)args_ptr + kArgsBlockBytes > bytes) {
    return "the argument block at " + std::to_string(args_ptr) + " is not a 64-byte aligned block inside the memory";
  }
  uint32_t w[kArgsBlockBytes / 4];
  memcpy(w, base + args_ptr, sizeof w);
  for (uint32_t i : {kM, kN, kK, kBatch, kStrideA, kStrideB, kStrideC, kLda}) {
    if (w[i] > kInt32Max) return "argument word " + std::to_string(i) + " is past 2^31 - 1";
  }
  MatmulCall g{};
  g.m = (int32_t)w[kM];
  g.n = (int32_t)w[kN];
  g.k = (int32_t)w[kK];
  g.batch = (int32_t)w[kBatch];
  g.stride_a = w[kStrideA];
  g.stride_b = w[kStrideB];
  g.stride_c = w[kStrideC];
  g.lda = (int32_t)w[kLda];
  g.trans_a = w[kTransA] != 0;
  g.trans_b = w[kTransB] != 0;
  g.accumulate = w[kAccumulate] != 0;
  memcpy(&g.alpha, &w[kAlpha], 4);
  g.dt = dt;
  g.ct = w[kCF32] ? kF32 : dt;
  g.tickets = (uint32_t*)(base + args_ptr + 4 * kTickets);

  const uint64_t eb = dt == kF32 ? 4 : 2, cb = g.ct == kF32 ? 4 : 2;
  const uint64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  if (a_rows > 1 && (uint64_t)g.lda < a_cols) return "lda (" + std::to_string(g.lda) + ") is shorter than a stored row of A";
  const uint64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  struct Operand {
    const char* name;
    uint32_t offset;
    uint64_t bytes;
  } operands[] = {
      {"A", w[kA], span(g.batch, a_rows, a_cols, g.lda, g.stride_a) * eb},
      {"B", w[kB], span(g.batch, b_rows, b_cols, b_cols, g.stride_b) * eb},
      {"C", w[kC], span(g.batch, g.m, g.n, g.n, g.stride_c) * cb},
      {"bias", w[kBias], w[kBias] ? (uint64_t)g.n * eb : 0},
  };
  for (const Operand& o : operands) {
    if ((uint64_t)o.offset + o.bytes > bytes) {
      return std::string("matmul ") + o.name + " (" + std::to_string(o.bytes) + " bytes at " + std::to_string(o.offset) +
             ") runs past the end of the memory (" + std::to_string(bytes) + " bytes)";
    }
  }
  g.a = base + w[kA];
  g.b = base + w[kB];
  g.c = base + w[kC];
  g.bias = w[kBias] ? base + w[kBias] : nullptr;
  *call = g;
  return std::string();
}

}  // namespace kiln_native
