// vector_io.h: 16-byte groups of storage elements (4 f32 or 8 bf16/f16) moved as
// one uint4 when the address allows, else element by element. Either way the
// values and their order are the same, so results do not depend on alignment.
#pragma once
#include "kiln_cuda.h"

namespace kiln {

template <typename T>
struct Group {
  static constexpr int N = 16 / static_cast<int>(sizeof(T));
  union {
    uint4 raw;
    T e[N];
  };
};

/** The N elements at p as f32: one 16-byte load when `aligned`. */
template <typename T>
__device__ __forceinline__ void load_group(const T* p, bool aligned, float (&v)[Group<T>::N]) {
  constexpr int N = Group<T>::N;
  if (aligned) {
    Group<T> g;
    g.raw = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = to_f32(g.e[k]);
  } else {
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = to_f32(p[k]);
  }
}

/** Rounds v to T and stores it at p: one 16-byte store when `aligned`. */
template <typename T>
__device__ __forceinline__ void store_group(T* p, bool aligned, const float (&v)[Group<T>::N]) {
  constexpr int N = Group<T>::N;
  if (aligned) {
    Group<T> g;
#pragma unroll
    for (int k = 0; k < N; k++) g.e[k] = from_f32<T>(v[k]);
    *reinterpret_cast<uint4*>(p) = g.raw;
  } else {
#pragma unroll
    for (int k = 0; k < N; k++) p[k] = from_f32<T>(v[k]);
  }
}

}  // namespace kiln
