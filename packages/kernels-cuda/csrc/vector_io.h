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

/**
 * The N elements at p, any address of a T, as f32: one 16-byte load when p is 16-byte
 * aligned, else the two aligned 16-byte chunks that hold them, shifted into place (the
 * same values as N scalar loads, in far fewer memory instructions). Reads only chunks
 * that hold an element of the group, so nothing outside the buffer's 16-byte chunks.
 */
template <typename T>
__device__ __forceinline__ void load_group_anywhere(const T* p, float (&v)[Group<T>::N]) {
  constexpr int N = Group<T>::N;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const unsigned s = static_cast<unsigned>(at & 15u);  // byte offset in its chunk: a multiple of sizeof(T)
  if (s == 0) {
    load_group(p, true, v);
    return;
  }
  const uint4* chunk = reinterpret_cast<const uint4*>(at - s);
  const uint4 a = chunk[0], b = chunk[1];
  const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  const unsigned q = s >> 2, bits = (s & 3u) * 8u;
  Group<T> g;
  uint32_t* out = reinterpret_cast<uint32_t*>(&g.raw);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    // Words i + q and i + q + 1 (q < 4: constant indices under a select, no local memory).
    const uint32_t lo = q == 0 ? w[i] : q == 1 ? w[i + 1] : q == 2 ? w[i + 2] : w[i + 3];
    const uint32_t hi = q == 0 ? w[i + 1] : q == 1 ? w[i + 2] : q == 2 ? w[i + 3] : w[i + 4];
    out[i] = bits == 0 ? lo : static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> bits);
  }
#pragma unroll
  for (int k = 0; k < N; k++) v[k] = to_f32(g.e[k]);
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
