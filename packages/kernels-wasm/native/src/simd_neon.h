// f32 vectors of 4 lanes (AArch64 Advanced SIMD, "NEON"): the operations the nest_*.h
// kernels are written in, for gemm_neon.cc (and native/test/kernel_check.cc). NEON is part
// of every AArch64 CPU, so no target flag is needed and nothing here needs a run-time check.
//
// Every operation gives the bits of its simd_avx2.h / simd_avx512.h counterpart lane by lane
// (so the matmul keeps the WebAssembly kernels' bits), where NEON's own instructions differ:
//   max / min   x86's rule, a > b ? a : b (a < b ? a : b): the second operand when either is
//               NaN, and of +0 and -0 the second too (NEON's fmax returns NaN and orders the
//               zeros); a compare and a bit select
//   round       to nearest, ties to even (frintn, as _MM_FROUND_TO_NEAREST_INT)
//   fma         one rounding (fmla); the build's -ffp-contract=off fuses nothing else
//   16-bit      bf16 -> f32 a shift; f16 -> f32 fcvtl (exact; a signalling NaN quieted with
//               its sign and payload, as vcvtph2ps), under the FPCR Linux gives a process
//               (default-NaN mode off; flush-to-zero does not apply to f16 inputs). The
//               integer f16 steps of kiln_storage.h would do too, but their constants,
//               hoisted out of the GEMM's k loop, spill one of its accumulators.
//               f32 -> bf16 / f16: kiln_storage.h's integer steps, as in the AVX headers.
//   hsum        (l0 + l1) + (l2 + l3), the order of csrc/kiln_storage.h's kiln_hsum; hmax
//               the AVX headers' halving, max(max(l0, l2), max(l1, l3)). (The matmul's sums
//               never cross lanes; the kernels whose sums do, attention, the norms and
//               cross-entropy, have bits of their own on each instruction set.)
#ifndef KILN_NATIVE_SIMD_NEON_H
#define KILN_NATIVE_SIMD_NEON_H

#include <arm_neon.h>
#include <stdint.h>

#include "matmul_call.h"

namespace kiln_native {
namespace {

struct Neon {
  using vec = float32x4_t;
  static constexpr int L = 4;  // lanes
  // Register tile: MR rows x NRV vectors = 21 accumulators. GCC keeps each of A's values of
  // a k step in a register of its own (fmla by element), so MR x NRV + MR + NRV (B's row)
  // must fit the 32 vector registers: 7 x 3 takes 31, with no spill in the k loop (8 x 3
  // and 6 x 4, 24 accumulators, store and reload some on every k step). A k step loads 19
  // floats for its 21 vector FMAs.
  static constexpr int MR = 7;
  static constexpr int NRV = 3;
  // Of the FMA ceiling loop: four FMA pipes of four cycles' latency (Neoverse V1 / V2,
  // Apple M) need 16 independent chains; with its two constants 18 of 32 registers.
  static constexpr int CHAINS = 16;
  static constexpr const char* name = "neon";

  static inline vec zero() { return vdupq_n_f32(0.0f); }
  static inline vec splat(float x) { return vdupq_n_f32(x); }
  static inline vec load(const float* p) { return vld1q_f32(p); }
  static inline void store(float* p, vec v) { vst1q_f32(p, v); }
  /* All ones in lanes [0, n), any n. */
  static inline uint32x4_t first(int n) {
    const int32_t lanes[4] = {0, 1, 2, 3};
    return vcltq_s32(vld1q_s32(lanes), vdupq_n_s32(n));
  }
  /* Lanes [0, n) from p (n <= 4), nothing read past them; the others 0. */
  static inline vec load_n(const float* p, int n) {
    vec v = zero();
    if (n > 0) v = vld1q_lane_f32(p, v, 0);
    if (n > 1) v = vld1q_lane_f32(p + 1, v, 1);
    if (n > 2) v = vld1q_lane_f32(p + 2, v, 2);
    if (n > 3) v = vld1q_lane_f32(p + 3, v, 3);
    return v;
  }
  /* Lanes [0, n) to p (n <= 4), nothing written past them. */
  static inline void store_n(float* p, vec v, int n) {
    if (n > 0) vst1q_lane_f32(p, v, 0);
    if (n > 1) vst1q_lane_f32(p + 1, v, 1);
    if (n > 2) vst1q_lane_f32(p + 2, v, 2);
    if (n > 3) vst1q_lane_f32(p + 3, v, 3);
  }
  static inline vec fma(vec a, vec b, vec c) { return vfmaq_f32(c, a, b); }  // a * b + c, one rounding
  static inline vec mul(vec a, vec b) { return vmulq_f32(a, b); }
  static inline vec add(vec a, vec b) { return vaddq_f32(a, b); }

  static inline vec sub(vec a, vec b) { return vsubq_f32(a, b); }
  /* max(a, b); a NaN in b is kept (the second operand wins when either is NaN). */
  static inline vec max(vec a, vec b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
  static inline float hsum(vec v) {
    const float32x4_t pairs = vpaddq_f32(v, v);  // l0 + l1, l2 + l3, ...
    return vgetq_lane_f32(pairs, 0) + vgetq_lane_f32(pairs, 1);
  }
  static inline float hmax(vec v) {
    const vec x = max(v, vextq_f32(v, v, 2));  // max(l0, l2), max(l1, l3), ...
    return vgetq_lane_f32(max(x, vextq_f32(x, x, 1)), 0);
  }
  /* Lanes [from, to) of x, the others `fill` (from and to may lie outside 0..4). */
  static inline vec keep(vec x, int from, int to, vec fill) { return vbslq_f32(vbicq_u32(first(to), first(from)), x, fill); }
  /* min(a, b); a NaN in b is kept, as in max. */
  static inline vec min(vec a, vec b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
  static inline vec div(vec a, vec b) { return vdivq_f32(a, b); }
  static inline vec round(vec x) { return vrndnq_f32(x); }
  /* 2^n for whole n in [-127, 127] (2^-127 as 0). A NaN n gives 1, as the AVX cvtps_epi32 (0x80000000 + 127) << 23 does. */
  static inline vec pow2(vec n) { return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23)); }
  /* -|x| */
  static inline vec neg_abs(vec x) { return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u))); }
  /* a where x < 0, else b (a NaN x: b) */
  static inline vec where_negative(vec x, vec a, vec b) { return vbslq_f32(vcltq_f32(x, zero()), a, b); }

  /* b where `mask` lanes are all ones, else a. */
  static inline uint32x4_t select(uint32x4_t mask, uint32x4_t a, uint32x4_t b) { return vbslq_u32(mask, b, a); }

  /* 4 values of dtype dt (bf16 or f16) at p, in f32. */
  static inline vec widen(const uint16_t* p, int dt) {
    if (dt == kBf16) return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
  }

  static inline uint32x4_t to_bf16_bits(vec v) {
    const uint32x4_t f = vreinterpretq_u32_f32(v);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(f, 16), vdupq_n_u32(1));
    const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(f, vdupq_n_u32(0x7fff)), lsb), 16);
    const uint32x4_t quiet = vorrq_u32(vshrq_n_u32(f, 16), vdupq_n_u32(0x0040));
    return select(vmvnq_u32(vceqq_f32(v, v)), rounded, quiet);
  }

  /* kiln_f32_to_f16's three cases on |f|: >= 2^16 infinity or NaN; < 2^-14 subnormal or zero
   * (adding 0.5 rounds the f16 subnormal into the low bits); else rebias and round. */
  static inline uint32x4_t to_f16_bits(vec v) {
    const uint32x4_t f = vreinterpretq_u32_f32(v);
    const uint32x4_t sign = vandq_u32(f, vdupq_n_u32(0x80000000u));
    const uint32x4_t a = veorq_u32(f, sign);
    const uint32x4_t is_nan = vcgtq_u32(a, vdupq_n_u32(0x7f800000));
    const uint32x4_t nan = vorrq_u32(vdupq_n_u32(0x7e00), vandq_u32(vshrq_n_u32(a, 13), vdupq_n_u32(0x3ff)));
    const uint32x4_t big = select(is_nan, vdupq_n_u32(0x7c00), nan);
    const uint32x4_t half = vdupq_n_u32(126u << 23);
    const uint32x4_t small = vsubq_u32(vreinterpretq_u32_f32(vaddq_f32(vreinterpretq_f32_u32(a), vreinterpretq_f32_u32(half))), half);
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(a, 13), vdupq_n_u32(1));
    const uint32x4_t normal = vshrq_n_u32(vaddq_u32(vsubq_u32(a, vdupq_n_u32(((127u - 15) << 23) - 0xfff)), odd), 13);
    uint32x4_t o = select(vcltq_u32(a, vdupq_n_u32(113u << 23)), normal, small);
    o = select(vcgeq_u32(a, vdupq_n_u32((127u + 16) << 23)), o, big);
    return vorrq_u32(o, vshrq_n_u32(sign, 16));
  }

  /* 4 values rounded once to dtype dt (bf16 or f16), stored at p. */
  static inline void narrow(uint16_t* p, vec v, int dt) {
    const uint32x4_t bits = dt == kBf16 ? to_bf16_bits(v) : to_f16_bits(v);
    vst1_u16(p, vmovn_u32(bits));  // every lane is below 2^16
  }

  /* A fused multiply-add of one lane's values, rounded as a vector lane is. */
  static inline float fma1(float a, float b, float c) { return vgetq_lane_f32(fma(splat(a), splat(b), splat(c)), 0); }
  static inline float half_to_float(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }
};

}  // namespace
}  // namespace kiln_native

#endif
