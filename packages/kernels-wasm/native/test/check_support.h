// Helpers of kernel_check.cc: failing with a message, f32 bits, a digest, seeded values,
// scalar references of the 16-bit conversions written from the formats' fields, a dtype
// array, and the tolerance check against f64.
#ifndef KILN_NATIVE_CHECK_SUPPORT_H
#define KILN_NATIVE_CHECK_SUPPORT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "matmul_call.h"

namespace kiln_native {
namespace {

[[noreturn]] void fail(const char* group, const char* what) {
  printf("FAIL %s: %s\n", group, what);
  exit(1);
}

uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* FNV-1a over bytes. */
struct Digest {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t*)p)[i]) * 1099511628211ull;
  }
};

uint32_t lcg(uint32_t* seed) { return *seed = *seed * 1103515245u + 12345u; }
float uniform(uint32_t* seed) { return (float)(lcg(seed) >> 8) * 0x1p-23f - 1.0f; }  // [-1, 1)

/* ---- 16-bit conversions from the formats' fields ------------------------------------ */

/* f16 -> f32 from the fields, exact; a NaN quiet with its sign and payload. */
uint32_t ref_f16_to_f32(uint16_t h, bool quiet) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return sign | 0x7f800000 | mant << 13 | (quiet && mant ? 0x400000 : 0);
  const float magnitude = exp == 0 ? (float)mant * 0x1p-24f : ldexpf((float)(1024 + mant), (int)exp - 25);
  return sign | bits_of(magnitude);
}

uint16_t ref_bf16(uint32_t f) {
  if ((f & 0x7fffffff) > 0x7f800000) return (uint16_t)((f >> 16) | 0x40);
  uint32_t upper = f >> 16;
  const uint32_t rest = f & 0xffff;
  if (rest > 0x8000 || (rest == 0x8000 && (upper & 1))) upper++;
  return (uint16_t)upper;
}

/* f32 -> f16 through doubles: the multiple of the f16 ulp at x's binade nearest x, ties to even. */
uint16_t ref_f16(uint32_t f) {
  const uint16_t sign = (uint16_t)((f >> 16) & 0x8000);
  const uint32_t a = f & 0x7fffffff;
  if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  const double x = (double)float_of(a);
  int e;
  frexp(x, &e);                                   // x = m 2^e, 1/2 <= m < 1
  const int ulp = e - 11 < -24 ? -24 : e - 11;    // 11 significant bits, subnormals 2^-24 apart
  const double r = ldexp(nearbyint(ldexp(x, -ulp)), ulp);
  if (r >= 65520.0 || a == 0x7f800000) return (uint16_t)(sign | 0x7c00);
  if (r < 0x1p-14) return (uint16_t)(sign | (uint16_t)ldexp(r, 24));
  int re;
  const double m = frexp(r, &re);
  return (uint16_t)(sign | (uint16_t)(re - 1 + 15) << 10 | (uint16_t)((m * 2 - 1) * 1024));
}

float widen1(const std::vector<uint16_t>& h, size_t i, int dt) {
  return float_of(dt == kBf16 ? (uint32_t)h[i] << 16 : ref_f16_to_f32(h[i], true));
}

/* An array of dtype dt (f32 in `f`, else 16-bit in `h`) holding random values. */
struct Array {
  int dt;
  std::vector<float> f;
  std::vector<uint16_t> h;
  Array(int dt_, size_t n, uint32_t seed) : dt(dt_) {
    f.resize(dt == kF32 ? n : 0);
    h.resize(dt == kF32 ? 0 : n);
    for (size_t i = 0; i < n; i++) {
      const float x = uniform(&seed);
      if (dt == kF32) f[i] = x;
      else h[i] = dt == kBf16 ? ref_bf16(bits_of(x)) : ref_f16(bits_of(x));
    }
  }
  float at(size_t i) const { return dt == kF32 ? f[i] : widen1(h, i, dt); }
  uint8_t* bytes() { return dt == kF32 ? (uint8_t*)f.data() : (uint8_t*)h.data(); }
  size_t size() const { return dt == kF32 ? f.size() : h.size(); }
  void set(size_t i, float x) {
    if (dt == kF32) f[i] = x;
    else h[i] = dt == kBf16 ? ref_bf16(bits_of(x)) : ref_f16(bits_of(x));
  }
  uint32_t bits(size_t i) const { return dt == kF32 ? bits_of(f[i]) : h[i]; }
};

void expect_close(const char* group, const char* what, const std::vector<float>& got, const std::vector<double>& want) {
  double scale = 0.0, worst = 0.0;
  for (double w : want) scale = fmax(scale, fabs(w));
  for (size_t i = 0; i < want.size(); i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
  if (!(worst <= 1e-4 * scale + 1e-6)) {
    char text[160];
    snprintf(text, sizeof text, "%s off by %g (largest value %g)", what, worst, scale);
    fail(group, text);
  }
}

}  // namespace
}  // namespace kiln_native

#endif
