// wgmma_sim.h: the simulator's wgmma.mma_async (sm_90a), behind the wrappers of
// csrc/wgmma_ptx.h (which includes this header under KILN_CUDA_SIM).
//
// wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T: the warpgroup (128 threads) computes
// D (64 x N, f32) += A (64 x 16) B (16 x N), B in shared memory and A either there or in
// registers (each warp's 16 rows as mma.m16n8k16's A fragment), each shared operand
// described by a 64-bit matrix descriptor (PTX ISA, "Matrix Descriptor"):
//   bits 0-13 start address >> 4, 16-29 leading-dimension byte offset (LBO) >> 4,
//   32-45 stride-dimension byte offset (SBO) >> 4, 49-51 base offset, 62-63 swizzle
//   (1: 128-byte; the only mode emulated here, with base offset 0).
// Element (r, k) of an operand (r along M for A, N for B; k in 0..15), as a byte
// offset from the start address, in the canonical 128-byte-swizzle layouts
// (T = 8 elements = 16 bytes):
//   K-major  ((8, m), (T, 2k)) : ((8T, SBO), (1, T))   (r / 8) SBO + (r % 8) 128 + (k / 8) 16 + (k % 8) 2
//   MN-major ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))
//            (r / 64) LBO + ((r % 64) / 8) 16 + (r % 8) 2 + (k / 8) SBO + (k % 8) 128
// then swizzled on the address itself: bits 4-6 ^= bits 7-9 (so the 1024-byte atoms
// must start 1024-aligned, as the kernels that use it arrange).
// D's fragment: thread t of the warpgroup (warp w = t / 32, lane l), register i of N / 2:
//   row 16 w + l / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (l % 4) + i % 2.
// An op runs when the wgmma.wait_group that retires its group runs (kiln_sim::wgmma_wait):
// it reads shared memory then and adds its 16 products to D in k order in f32, so a
// stage overwritten before that wait, or an accumulator read before it, gives wrong
// numbers, as on the hardware.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace kiln_sim {

namespace wgmma_detail {

struct SharedMatrix {
  const unsigned char* start;
  size_t lbo, sbo;
};

[[noreturn]] inline void refuse(const char* why, const WgmmaOp& op) {
  char msg[512];
  std::snprintf(msg, sizeof msg, "wgmma at %s:%d: %s", op.file, op.line, why);
  fail(msg);
}

inline SharedMatrix decode(uint64_t desc, const WgmmaOp& op) {
  if ((desc >> 62) != 1) refuse("the simulator emulates descriptors with the 128-byte swizzle only (bits 62-63 = 1)", op);
  if (((desc >> 49) & 7) != 0) refuse("a descriptor's base offset must be 0 (its matrix starts on a 1024-byte swizzle atom)", op);
  const auto* base = static_cast<const unsigned char*>(dynamic_shared_memory());
  return SharedMatrix{base + ((desc & 0x3FFF) << 4), ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4};
}

/** `checked`: the last 16-byte granule this op's loads checked (the next load in it needs no check). */
template <typename T>
inline float load_element(const SharedMatrix& x, unsigned r, unsigned k, bool mn_major, const WgmmaOp& op, uintptr_t& checked) {
  uintptr_t a = reinterpret_cast<uintptr_t>(x.start) +
                (mn_major ? (r / 64) * x.lbo + ((r % 64) / 8) * 16 + (r % 8) * 2 + (k / 8) * x.sbo + (k % 8) * 128 : (r / 8) * x.sbo + (r % 8) * 128 + (k / 8) * 16 + (k % 8) * 2);
  a ^= ((a >> 7) & 7) << 4;
  const void* p = reinterpret_cast<const void*>(a);
  if ((a | 15) != checked) {
    check_access("wgmma operand", p, 2, true, op.file, op.line);
    check_landed_visible("wgmma", p, op.file, op.line);
    checked = a | 15;
  }
  T v;
  std::memcpy(&v, p, 2);
  return static_cast<float>(v);
}

}  // namespace wgmma_detail

/**
 * This thread's D fragment (N / 2 registers) += its two rows of A (arow) times B (16 x N,
 * shared memory), each output's 16 products added in k order in f32.
 */
template <typename T, int N, bool MN_MAJOR_B>
inline void wgmma_rows_times_b(const WgmmaOp& op, const float (&arow)[2][16]) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N a multiple of 8 up to 256");
  const wgmma_detail::SharedMatrix b = wgmma_detail::decode(op.desc_b, op);
  const unsigned l = op.warpgroup_thread % 32;
  float bcol[N / 4][16];  // this thread's N / 4 columns of B
  uintptr_t checked = 0;
  for (unsigned c = 0; c < N / 4; c++)
    for (unsigned k = 0; k < 16; k++) bcol[c][k] = wgmma_detail::load_element<T>(b, 8 * (c / 2) + 2 * (l % 4) + c % 2, k, MN_MAJOR_B, op, checked);
  for (unsigned i = 0; i < N / 2; i++) {
    const unsigned h = (i / 2) % 2, c = 2 * (i / 4) + i % 2;  // row 16 w + l / 4 + 8 h, column 8 (c / 2) + 2 (l % 4) + c % 2
    float acc = op.scale_d ? op.d[i] : 0.f;
    for (unsigned k = 0; k < 16; k++) acc += arow[h][k] * bcol[c][k];
    op.d[i] = acc;
  }
}

/** Runs one queued wgmma m64nNk16 with A in shared memory for the thread that issued it (see the header). */
template <typename T, int N, bool MN_MAJOR_A, bool MN_MAJOR_B>
inline void run_wgmma(const WgmmaOp& op) {
  const wgmma_detail::SharedMatrix a = wgmma_detail::decode(op.desc_a, op);
  const unsigned w = op.warpgroup_thread / 32, l = op.warpgroup_thread % 32;
  float arow[2][16];  // this thread's two rows of A
  uintptr_t checked = 0;
  for (unsigned h = 0; h < 2; h++)
    for (unsigned k = 0; k < 16; k++) arow[h][k] = wgmma_detail::load_element<T>(a, 16 * w + l / 4 + 8 * h, k, MN_MAJOR_A, op, checked);
  wgmma_rows_times_b<T, N, MN_MAJOR_B>(op, arow);
}

/** The same with A from registers: the rows were gathered at issue (op.a_rows). */
template <typename T, int N, bool MN_MAJOR_B>
inline void run_wgmma_register_a(const WgmmaOp& op) {
  wgmma_rows_times_b<T, N, MN_MAJOR_B>(op, op.a_rows);
}

/**
 * A thread's two rows of a register A operand (64 x 16, T), from the fragments of the 4
 * lanes of its quad (`quad`: their four 32-bit registers each, as mma.m16n8k16's A):
 * lane 4 g + q holds (g, 2q..2q+1), (g + 8, 2q..), (g, 2q + 8..), (g + 8, 2q + 8..), the
 * lower column in the low half of each register.
 */
template <typename T>
inline void gather_register_rows(float (&rows)[2][16], const uint32_t (&quad)[4][4]) {
  for (unsigned q = 0; q < 4; q++)
    for (unsigned r = 0; r < 4; r++) {
      const unsigned h = r % 2, k = 2 * q + 8 * (r / 2);
      const uint16_t lo = static_cast<uint16_t>(quad[q][r] & 0xFFFFu), hi = static_cast<uint16_t>(quad[q][r] >> 16);
      T a, b;
      std::memcpy(&a, &lo, 2);
      std::memcpy(&b, &hi, 2);
      rows[h][k] = static_cast<float>(a);
      rows[h][k + 1] = static_cast<float>(b);
    }
}

}  // namespace kiln_sim
