// Loads and stores of dtype arrays for the native matmul, on the vectors of one
// instruction set V (simd_avx512.h, simd_avx2.h, simd_neon.h): an array is (base bytes,
// element index, dtype), the dtype a template constant. 16-bit values are widened to f32
// exactly and stored rounded once, through V's conversions; a partial vector reads and
// writes only its first n elements.
//
// The nest_*.h headers are included only by the per-instruction-set translation units
// (gemm_avx512.cc, gemm_avx2.cc, gemm_neon.cc), each compiled with its own target flags.
// Everything in them sits in an anonymous namespace, so each unit has its own copy and no
// function compiled for one instruction set can stand in for another's at link time.
#ifndef KILN_NATIVE_NEST_ACCESS_H
#define KILN_NATIVE_NEST_ACCESS_H

#include <stdint.h>
#include <string.h>

#include "matmul_call.h"

namespace kiln_native {
namespace {

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int64_t imin64(int64_t a, int64_t b) { return a < b ? a : b; }

template <int DT>
static inline int64_t element_bytes() {
  return DT == kF32 ? 4 : 2;
}

/* Element i of a dtype array as f32 (16-bit widened exactly). */
template <class V, int DT>
static inline float load1(const uint8_t* base, int64_t i) {
  if (DT == kF32) return ((const float*)base)[i];
  const uint16_t h = ((const uint16_t*)base)[i];
  if (DT == kBf16) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  return V::half_to_float(h);
}

/* Elements [i, i + L) as f32. */
template <class V, int DT>
static inline typename V::vec vload(const uint8_t* base, int64_t i) {
  if (DT == kF32) return V::load((const float*)base + i);
  return V::widen((const uint16_t*)base + i, DT);
}

/* Elements [i, i + min(n, L)), reading nothing past them; the other lanes 0. */
template <class V, int DT>
static inline typename V::vec vload_n(const uint8_t* base, int64_t i, int n) {
  if (n >= V::L) return vload<V, DT>(base, i);
  if (DT == kF32) return V::load_n((const float*)base + i, n);
  uint16_t tmp[V::L] = {0};
  memcpy(tmp, (const uint16_t*)base + i, (size_t)n * 2);
  return V::widen(tmp, DT);
}

/* Lanes [0, min(n, L)) into elements [i, ...), rounded once to DT, writing nothing else. */
template <class V, int DT>
static inline void vstore_n(uint8_t* base, int64_t i, typename V::vec x, int n) {
  if (DT == kF32) {
    if (n >= V::L) V::store((float*)base + i, x);
    else V::store_n((float*)base + i, x, n);
    return;
  }
  if (n >= V::L) {
    V::narrow((uint16_t*)base + i, x, DT);
    return;
  }
  uint16_t tmp[V::L];
  V::narrow(tmp, x, DT);
  memcpy((uint16_t*)base + i, tmp, (size_t)n * 2);
}

/* One element, rounded by the same vector conversion as every other. */
template <class V, int DT>
static inline void store1(uint8_t* base, int64_t i, float x) {
  if (DT == kF32) {
    ((float*)base)[i] = x;
    return;
  }
  vstore_n<V, DT>(base, i, V::splat(x), 1);
}

}  // namespace
}  // namespace kiln_native

#endif
