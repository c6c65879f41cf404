// One instruction set's native kernels run without Node: built for AArch64 (NEON; static,
// run by qemu-aarch64) and for x86-64 (AVX2) by test/native-arm64-build.test.ts, from the
// same nest_*.h as the addon. It checks, and exits 1 at the first failure, saying what:
//   conversions  widening every bf16 / f16 pattern, and rounding f32 patterns at and around
//                every 16-bit value (ties, one ulp either side) and random ones, against
//                scalar references written from the formats' fields
//   lanes        max / min (x86's NaN and zero rules), round (ties to even), pow2, keep; on
//                NEON hsum and hmax in their documented orders
//   matmul       every dtype pair on shapes with ragged edges, several k blocks, trans_a /
//                trans_b, lda, alpha, accumulate, bias, batches, matrix-vector forms: bit
//                for bit the summation orders of nest_gemm.h and nest_matvec.h (those of
//                csrc/matmul.c) written as scalar loops
//   attention    forward (out, lse) and backward (dQ, dK, dV) against f64, sliding window and
//                grouped heads, within 1e-4 of the largest value
//   norms        LayerNorm / RMSNorm forward and backward (dX, dWeight) against f64, likewise
//   crossEntropy forward-backward (losses, lse, dLogits; rows longer than a sum block and a
//                row without a target) against f64, likewise
// and prints a digest of the results whose bits do not depend on the lane count (the
// conversions, the matmul, GELU forward and backward on special and random values): the
// test compares the NEON build's digests with the AVX2 build's. (Scalar references and
// helpers: check_support.h; the checks against f64: check_f64.h.)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#if defined(__aarch64__)
#include "simd_neon.h"
#else
#include "simd_avx2.h"
#endif
#include "nest_entry.h"

#include "check_f64.h"
#include "check_support.h"

using namespace kiln_native;
#if defined(__aarch64__)
using V = Neon;
#else
using V = Avx2;
#endif

namespace {

const IsaKernels kernels = isa_kernels<V>();

/* ---- conversions ---------------------------------------------------------------------- */

void check_conversions(Digest* d) {
  std::vector<uint16_t> all(65536);
  std::vector<float> wide(65536);
  for (int h = 0; h < 65536; h++) all[h] = (uint16_t)h;
  char what[160];
  for (int dt : {kBf16, kF16}) {
    kernels.widen(all.data(), wide.data(), 65536, dt);
    for (int h = 0; h < 65536; h++) {
      const uint32_t want = dt == kBf16 ? (uint32_t)h << 16 : ref_f16_to_f32((uint16_t)h, true);
      if (bits_of(wide[h]) != want) {
        snprintf(what, sizeof what, "widen %s 0x%04x: 0x%08x, not 0x%08x", dt == kBf16 ? "bf16" : "f16", h, bits_of(wide[h]), want);
        fail("conversions", what);
      }
    }
    d->add(wide.data(), wide.size() * 4);
    std::vector<uint32_t> probes;
    const int shift = dt == kBf16 ? 16 : 13;
    const uint32_t half = 1u << (shift - 1);
    for (int h = 0; h < 65536; h++) {
      const uint32_t v = dt == kBf16 ? (uint32_t)h << 16 : ref_f16_to_f32((uint16_t)h, false);
      for (uint32_t delta : {0u, 1u, half - 1, half, half + 1}) {
        probes.push_back(v + delta);
        probes.push_back(v - delta);
      }
    }
    uint32_t seed = 12345;
    for (int i = 0; i < 1 << 18; i++) probes.push_back(lcg(&seed) ^ ((uint32_t)i << 3));
    std::vector<float> in(probes.size());
    std::vector<uint16_t> out(probes.size());
    memcpy(in.data(), probes.data(), probes.size() * 4);
    kernels.narrow(in.data(), out.data(), (int64_t)in.size(), dt);
    for (size_t i = 0; i < probes.size(); i++) {
      const uint16_t want = dt == kBf16 ? ref_bf16(probes[i]) : ref_f16(probes[i]);
      if (out[i] != want) {
        snprintf(what, sizeof what, "narrow to %s 0x%08x: 0x%04x, not 0x%04x", dt == kBf16 ? "bf16" : "f16", probes[i], out[i], want);
        fail("conversions", what);
      }
    }
    d->add(out.data(), out.size() * 2);
  }
}

/* ---- lanes ---------------------------------------------------------------------------- */

float x86_max(float a, float b) { return a > b ? a : b; }
float x86_min(float a, float b) { return a < b ? a : b; }

V::vec lanes_of(const float* x) { return V::load(x); }

void check_lanes() {
  const float nan = float_of(0x7fc00001), specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.5f,
                                                        8388607.5f, -8388609.0f, 1e-45f, 3.4e38f, INFINITY, -INFINITY, nan, -nan};
  const int count = sizeof specials / sizeof specials[0];
  char what[160];
  float x[V::L], y[V::L], got[V::L];
  for (int i = 0; i < count; i++)
    for (int j = 0; j < count; j++) {
      for (int l = 0; l < V::L; l++) x[l] = specials[i], y[l] = specials[(j + l) % count];
      V::store(got, V::max(lanes_of(x), lanes_of(y)));
      for (int l = 0; l < V::L; l++)
        if (bits_of(got[l]) != bits_of(x86_max(x[l], y[l]))) {
          snprintf(what, sizeof what, "max(0x%08x, 0x%08x) = 0x%08x", bits_of(x[l]), bits_of(y[l]), bits_of(got[l]));
          fail("lanes", what);
        }
      V::store(got, V::min(lanes_of(x), lanes_of(y)));
      for (int l = 0; l < V::L; l++)
        if (bits_of(got[l]) != bits_of(x86_min(x[l], y[l]))) {
          snprintf(what, sizeof what, "min(0x%08x, 0x%08x) = 0x%08x", bits_of(x[l]), bits_of(y[l]), bits_of(got[l]));
          fail("lanes", what);
        }
    }
  for (int i = 0; i < count; i++) {
    for (int l = 0; l < V::L; l++) x[l] = specials[(i + l) % count];
    V::store(got, V::round(lanes_of(x)));
    for (int l = 0; l < V::L; l++)
      if (bits_of(got[l]) != bits_of(nearbyintf(x[l]))) {  // the default rounding mode: nearest, ties to even
        snprintf(what, sizeof what, "round(0x%08x) = 0x%08x", bits_of(x[l]), bits_of(got[l]));
        fail("lanes", what);
      }
  }
  for (int n = -127; n <= 127; n++) {
    V::store(got, V::pow2(V::splat((float)n)));
    if (got[0] != (n == -127 ? 0.0f : ldexpf(1.0f, n))) fail("lanes", "pow2");
  }
  for (int from = -2; from <= V::L + 2; from++)
    for (int to = -2; to <= V::L + 2; to++) {
      for (int l = 0; l < V::L; l++) x[l] = (float)(l + 1);
      V::store(got, V::keep(lanes_of(x), from, to, V::splat(-1.0f)));
      for (int l = 0; l < V::L; l++)
        if (got[l] != (l >= from && l < to ? x[l] : -1.0f)) fail("lanes", "keep");
    }
#if defined(__aarch64__)
  const float sums[4] = {1e8f, 1.0f, -1e8f, 1.0f}, maxes[4] = {1.0f, nan, 3.0f, 2.0f};
  if (bits_of(V::hsum(lanes_of(sums))) != bits_of((sums[0] + sums[1]) + (sums[2] + sums[3]))) fail("lanes", "hsum order");
  const float m = x86_max(x86_max(maxes[0], maxes[2]), x86_max(maxes[1], maxes[3]));
  if (bits_of(V::hmax(lanes_of(maxes))) != bits_of(m)) fail("lanes", "hmax order");
#endif
}

/* ---- matmul --------------------------------------------------------------------------- */

struct Shape {
  int m, n, k, batch, lda_pad;
  bool ta, tb, accumulate, bias;
  float alpha;
  int64_t stride_b_items;  // 0: B broadcast over the batch
};

/* row_dot of nest_matvec.h: 16 lanes over p, then four, the lanes added across, the rest one by one. */
float ref_row_dot(const Array& x, size_t at, const std::vector<float>& v, int k) {
  float l[16] = {0};
  int p = 0;
  for (; p + 16 <= k; p += 16)
    for (int i = 0; i < 16; i++) l[i] = fmaf(x.at(at + p + i), v[p + i], l[i]);
  for (; p + 4 <= k; p += 4)
    for (int i = 0; i < 4; i++) l[i] = fmaf(x.at(at + p + i), v[p + i], l[i]);
  float t[4];
  for (int i = 0; i < 4; i++) t[i] = (l[i] + l[4 + i]) + (l[8 + i] + l[12 + i]);
  float sum = ((t[0] + t[1]) + t[2]) + t[3];
  for (; p < k; p++) sum = sum + x.at(at + p) * v[p];
  return sum;
}

void check_matmul(int dt, int ct, const Shape& s, int parts, Digest* d) {
  const int lda = s.ta ? s.m + s.lda_pad : s.k + s.lda_pad;
  const int64_t sa = (int64_t)(s.ta ? s.k : s.m) * lda, sb = (int64_t)s.k * s.n * s.stride_b_items, sc = (int64_t)s.m * s.n;
  Array a(dt, (size_t)(sa * s.batch), 1), b(dt, (size_t)(s.k * s.n * (s.stride_b_items ? s.batch : 1)), 2), bias(dt, (size_t)s.n, 3);
  Array c(ct, (size_t)(sc * s.batch), 4);
  const Array c0 = c;
  uint32_t tickets = 0;
  MatmulCall g{};
  g.m = s.m, g.n = s.n, g.k = s.k, g.batch = s.batch;
  g.a = a.bytes(), g.b = b.bytes(), g.c = c.bytes(), g.bias = s.bias ? bias.bytes() : nullptr;
  g.stride_a = sa, g.stride_b = sb, g.stride_c = sc, g.lda = lda;
  g.trans_a = s.ta, g.trans_b = s.tb, g.accumulate = s.accumulate, g.alpha = s.alpha, g.dt = dt, g.ct = ct, g.tickets = &tickets;
  for (int part = 0; part < parts; part++) kernels.matmul(g, part, parts);

  const int ldb = s.tb ? s.k : s.n;
  const bool matvec = (s.m == 1 || s.n == 1) && s.k > 0 && !(s.m == 1 && s.ta && lda != 1);
  Array want = c0;
  for (int item = 0; item < s.batch; item++) {
    const size_t ai = (size_t)(item * sa), bi = (size_t)(item * sb), ci = (size_t)(item * sc);
    auto A = [&](int i, int p) { return a.at(ai + (s.ta ? (size_t)p * lda + i : (size_t)i * lda + p)); };
    auto B = [&](int p, int j) { return b.at(bi + (s.tb ? (size_t)j * ldb + p : (size_t)p * ldb + j)); };
    for (int i = 0; i < s.m; i++)
      for (int j = 0; j < s.n; j++) {
        const size_t at = ci + (size_t)i * s.n + j;
        float x;
        const float bias_j = s.bias ? bias.at(matvec && s.n == 1 ? 0 : (size_t)j) : 0.0f;
        if (s.k == 0) {
          x = (s.accumulate ? c0.at(at) : 0.0f) + bias_j;
        } else if (matvec) {
          /* vector_times_rows: one chain over p; rows_dot_vector: ref_row_dot */
          const bool chain = s.m == 1 ? !s.tb : s.ta;
          float sum = 0.0f;
          if (chain) {
            for (int p = 0; p < s.k; p++) sum = fmaf(s.m == 1 ? A(0, p) : B(p, 0), s.m == 1 ? B(p, j) : A(i, p), sum);
          } else {
            std::vector<float> v(s.k);
            for (int p = 0; p < s.k; p++) v[p] = s.m == 1 ? A(0, p) : B(p, 0);
            Array row(kF32, s.k, 0);
            for (int p = 0; p < s.k; p++) row.f[p] = s.m == 1 ? B(p, j) : A(i, p);
            sum = ref_row_dot(row, 0, v, s.k);
          }
          x = s.alpha * sum;
          if (s.accumulate) x = x + c0.at(at);
          if (s.bias) x = x + bias_j;
        } else {
          /* nest_gemm.h: one FMA chain per k block of KC, alpha times it, then C and the bias, or the partial sum */
          x = 0.0f;
          for (int pc = 0; pc < s.k; pc += KC) {
            float chain = 0.0f;
            for (int p = pc; p < s.k && p < pc + KC; p++) chain = fmaf(A(i, p), B(p, j), chain);
            if (pc == 0) {
              x = s.alpha * chain;
              if (s.accumulate) x = x + c0.at(at);
              if (s.bias) x = x + bias_j;
            } else {
              x = s.alpha * chain + x;
            }
          }
        }
        want.set(at, x);
      }
  }
  for (size_t i = 0; i < c.size(); i++)
    if (c.bits(i) != want.bits(i)) {
      char what[200];
      snprintf(what, sizeof what, "dt %d ct %d, %d x %d x %d (batch %d%s%s%s%s, %d parts): element %zu is 0x%08x, not 0x%08x", dt, ct, s.m, s.n, s.k,
               s.batch, s.ta ? ", trans_a" : "", s.tb ? ", trans_b" : "", s.accumulate ? ", accumulate" : "", s.bias ? ", bias" : "", parts, i,
               c.bits(i), want.bits(i));
      fail("matmul", what);
    }
  d->add(c.bytes(), c.size() * (ct == kF32 ? 4 : 2));
}

void check_matmuls(Digest* d) {
  const Shape shapes[] = {
      {13, 29, 37, 1, 0, false, false, false, false, 1.0f, 1},   {13, 29, 300, 1, 0, true, false, false, false, 1.0f, 1},
      {17, 25, 70, 1, 3, false, true, true, true, 0.5f, 1},     {9, 12, 513, 1, 0, true, true, true, true, -1.5f, 1},
      {7, 12, 16, 1, 0, false, false, false, false, 1.0f, 1},   {150, 40, 20, 1, 0, false, true, false, true, 1.0f, 1},
      {6, 14, 33, 3, 1, false, false, true, false, 2.0f, 0},     {5, 9, 11, 4, 0, true, true, false, true, 1.0f, 1},
      {1, 37, 50, 1, 0, false, false, true, true, 0.75f, 1},     {1, 37, 50, 1, 0, false, true, false, true, 1.0f, 1},
      {23, 1, 45, 1, 0, false, false, true, true, 1.0f, 1},      {23, 1, 45, 1, 2, true, false, false, true, 0.5f, 1},
      {1, 70, 300, 2, 0, false, true, true, false, 1.0f, 1},     {4, 6, 0, 1, 0, false, false, true, true, 1.0f, 1},
  };
  const int pairs[][2] = {{kF32, kF32}, {kBf16, kF32}, {kBf16, kBf16}, {kF16, kF32}, {kF16, kF16}};
  for (const auto& pair : pairs)
    for (const Shape& s : shapes)
      for (int parts : {1, 3}) check_matmul(pair[0], pair[1], s, parts, d);
}

/* ---- GELU ----------------------------------------------------------------------------- */

void check_gelu(Digest* d) {
  std::vector<float> x;
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-45f, 0.5f, -0.5f, 3.0f, -3.0f, 9.5f, -9.5f, 20.0f, -20.0f, 100.0f, -100.0f,
                            1e4f, -1e4f, 3e4f, -3e4f, 1e30f, -1e30f, INFINITY, -INFINITY, float_of(0x7fc00000)};
  for (float s : specials) x.push_back(s);
  uint32_t seed = 99;
  for (int i = 0; i < 4096; i++) x.push_back(uniform(&seed) * 12.0f);
  for (int i = -800; i <= 800; i++) x.push_back((float)i / 64.0f);
  for (int dt : {kF32, kBf16, kF16}) {
    Array in(dt, x.size(), 0), grad(dt, x.size(), 7), out(dt, x.size(), 0), dx(dt, x.size(), 0);
    for (size_t i = 0; i < x.size(); i++) in.set(i, x[i]);
    ActivationCall f{(int64_t)x.size(), dt, in.bytes(), nullptr, out.bytes()};
    ActivationCall b{(int64_t)x.size(), dt, in.bytes(), grad.bytes(), dx.bytes()};
    kernels.gelu_forward(f, 0, 1);
    kernels.gelu_backward(b, 0, 1);
    for (size_t i = 0; i < x.size(); i++) {
      const double v = in.at(i), want = v / (1.0 + exp(-1.5957691216057308 * (v + 0.044715 * v * v * v)));
      if (!isfinite(v) || fabs(v) > 1e4) continue;
      if (fabs(out.at(i) - want) > (dt == kF32 ? 2e-6 : 1e-2) * (1.0 + fabs(want))) fail("gelu", "forward far from f64");
    }
    /* A NaN's sign and payload are each instruction set's own (x86's default NaN is negative, Arm's positive): one NaN for the digest. */
    for (Array* r : {&out, &dx})
      for (size_t i = 0; i < r->size(); i++) {
        if (r->at(i) != r->at(i)) r->set(i, float_of(0x7fc00000));
        const uint32_t bits = r->bits(i);
        d->add(&bits, 4);
      }
  }
}

}  // namespace

int main() {
  kernels.prepare_thread();
  Digest conversions, matmul, gelu;
  check_conversions(&conversions);
  check_lanes();
  check_matmuls(&matmul);
  check_gelu(&gelu);
  check_attention(kernels, 53, 4, 2, 20, 36, 53);
  check_attention(kernels, 70, 2, 1, 32, 32, 9);
  check_norm(kernels, true, 7, 37);
  check_norm(kernels, false, 5, 64);
  check_cross_entropy(kernels, 4, 5000);
  printf("isa %s\n", kernels.name);
  printf("digest conversions %016llx\n", (unsigned long long)conversions.h);
  printf("digest matmul %016llx\n", (unsigned long long)matmul.h);
  printf("digest gelu %016llx\n", (unsigned long long)gelu.h);
  printf("ok\n");
  return 0;
}
