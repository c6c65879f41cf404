/*
 * Shared definitions for every kernel family.
 *
 * Each .c file in this folder is compiled twice from the same source:
 *   plain   : -msimd128                       MADD(c, a, b) = c + a * b  (f32x4 mul, then add)
 *   relaxed : -msimd128 -mrelaxed-simd         MADD(c, a, b) = fused f32x4.relaxed_madd
 * KILN_RELAXED_SIMD is defined to 1 in the relaxed build.
 *
 * Calling convention of every kernel entry point:
 *   void kiln_<name>(const void* args, int thread, int nthreads)
 * `args` points at a little-endian struct in linear memory written by the
 * host; every thread of the pool calls the entry point with the same args and
 * its own index in [0, nthreads) and computes its own disjoint part.
 */
#ifndef KILN_SIMD_H
#define KILN_SIMD_H

#include <stdint.h>
#include <stddef.h>
#include <wasm_simd128.h>

#define KILN_EXPORT(name) __attribute__((export_name(#name), used)) 
#define KILN_INLINE static inline __attribute__((always_inline))

#if defined(KILN_RELAXED_SIMD) && KILN_RELAXED_SIMD
/* c + a * b with a single rounding where the host has FMA (relaxed semantics allow either). */
#define KILN_MADD(c, a, b) ((v128_t)__builtin_wasm_relaxed_madd_f32x4((__f32x4)(a), (__f32x4)(b), (__f32x4)(c)))
/* mask ? a : b per lane, where every mask lane is all ones or all zeros (a comparison's result):
 * one blend instruction, where bitselect takes three. */
#define KILN_SELECT(a, b, mask) \
  ((v128_t)__builtin_wasm_relaxed_laneselect_i32x4((__i32x4)(a), (__i32x4)(b), (__i32x4)(mask)))
#else
#define KILN_MADD(c, a, b) wasm_f32x4_add((c), wasm_f32x4_mul((a), (b)))
#define KILN_SELECT(a, b, mask) wasm_v128_bitselect((a), (b), (mask))
#endif

KILN_INLINE int kiln_min(int a, int b) { return a < b ? a : b; }
KILN_INLINE int kiln_max(int a, int b) { return a > b ? a : b; }

#endif
