#include "norm_args.h"

#include <string.h>

#include "matmul_args.h"
#include "matmul_call.h"

namespace kiln_native {

namespace {

/* Word indices of NormForwardArgs and NormBackwardArgs (csrc/norm.c; FWD and BWD in src/backend-norm.ts). */
enum ForwardWord : uint32_t { fRows = 0, fDim = 1, fDtype = 2, fEps = 3, fX = 4, fWeight = 5, fBias = 6, fOut = 7, fMean = 8, fRstd = 9, fResidual = 10, fSum = 11, fWeightOffset = 12 };
enum BackwardWord : uint32_t {
  bRows = 0, bDim = 1, bDtype = 2, bPartials = 3, bDOut = 4, bX = 5, bWeight = 6, bMean = 7, bRstd = 8, bDX = 9,
  bDWeight = 10, bDBias = 11, bScratch = 12, bStride = 13, bGradDtype = 14, bDRes = 15, bDXSums = 16, bWeightOffset = 17,
};
constexpr uint32_t kTickets = 32;

}  // namespace

std::string decode_norm(uint8_t* base, size_t bytes, uint32_t args_ptr, bool backward, bool layer, NormCall* call) {
  if (args_ptr % 64 != 0 || (uint64_t)args_ptr + kArgsBlockBytes > bytes) {
    return "the argument block at " + std::to_string(args_ptr) + " is not a 64-byte aligned block inside the memory";
  }
  uint32_t w[kArgsBlockBytes / 4];
  memcpy(w, base + args_ptr, sizeof w);
  if (w[0] == 0 || w[1] == 0 || w[0] > 0x7fffffffu || w[1] > 0x7fffffffu) return "rows and dim must be in 1 .. 2^31 - 1";
  NormCall c{};
  c.rows = (int32_t)w[0];
  c.dim = (int32_t)w[1];
  c.dt = (int32_t)w[2];
  c.layer = layer;
  if (c.dt != kF32 && c.dt != kBf16 && c.dt != kF16) return "unknown dtype code " + std::to_string(c.dt);
  const uint64_t eb = c.dt == kF32 ? 4 : 2, matrix = (uint64_t)c.rows * c.dim * eb, row = (uint64_t)c.dim * eb, stats = (uint64_t)c.rows * 4;
  struct Operand {
    const char* name;
    uint32_t offset;
    uint64_t bytes;
    bool optional;
  };
  auto check = [&](const Operand& o) -> std::string {
    if (o.offset == 0 && o.optional) return std::string();
    if ((uint64_t)o.offset + o.bytes > bytes) {
      return std::string(o.name) + " (" + std::to_string(o.bytes) + " bytes at " + std::to_string(o.offset) + ") runs past the end of the memory";
    }
    return std::string();
  };
  std::string error;
  auto ptr = [&](const Operand& o) -> uint8_t* {
    if (error.empty()) error = check(o);
    return o.offset ? base + o.offset : nullptr;
  };
  if (!backward) {
    memcpy(&c.eps, &w[fEps], 4);
    memcpy(&c.weight_offset, &w[fWeightOffset], 4);
    c.x = ptr({"x", w[fX], matrix, false});
    c.weight = ptr({"weight", w[fWeight], row, false});
    c.bias = layer ? ptr({"bias", w[fBias], row, true}) : nullptr;
    c.out = ptr({"out", w[fOut], matrix, false});
    c.mean = layer ? (float*)ptr({"mean", w[fMean], stats, false}) : nullptr;
    c.rstd = (float*)ptr({"rstd", w[fRstd], stats, false});
    c.residual = ptr({"residual", w[fResidual], matrix, true});
    c.sum = c.residual ? ptr({"sum", w[fSum], matrix, false}) : nullptr;
  } else {
    memcpy(&c.weight_offset, &w[bWeightOffset], 4);
    c.partials = (int32_t)w[bPartials];
    c.stride = w[bStride];
    if (c.partials < 1 || c.partials > 4096) return "partials must be in 1 .. 4096";
    const int64_t dim4 = (c.dim + 3) / 4 * 4;
    c.d_bias = layer && w[bDBias] != 0;
    c.d_x_sums = w[bDXSums] != 0;
    if (c.stride < (c.d_x_sums ? 3 : 2) * dim4) return "the scratch stride is too short for the partial rows";
    c.d_out = ptr({"dOut", w[bDOut], matrix, false});
    c.x = ptr({"x", w[bX], matrix, false});
    c.weight = ptr({"weight", w[bWeight], row, false});
    c.mean = layer ? (float*)ptr({"mean", w[bMean], stats, false}) : nullptr;
    c.rstd = (float*)ptr({"rstd", w[bRstd], stats, false});
    c.d_x = ptr({"dX", w[bDX], matrix, false});
    c.d_res = ptr({"dResidual", w[bDRes], matrix, true});
    c.scratch = (float*)ptr({"scratch", w[bScratch], (uint64_t)c.partials * (uint64_t)c.stride * 4, false});
    (void)bGradDtype;
    (void)bDWeight;
  }
  if (!error.empty()) return error;
  if ((c.mean && ((uintptr_t)c.mean % 4)) || ((uintptr_t)c.rstd % 4) || (c.scratch && ((uintptr_t)c.scratch % 4))) return "an f32 operand is not 4-byte aligned";
  c.tickets = (uint32_t*)(base + args_ptr + 4 * kTickets);
  *call = c;
  return std::string();
}

}  // namespace kiln_native
