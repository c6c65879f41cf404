// mma_sim.h: the simulator's mma.sync m16n8k16, ldmatrix and cp.async, behind the
// wrappers of csrc/mma_ptx.h (which includes this header under KILN_CUDA_SIM).
//
// mma and ldmatrix are warp-collective (`.sync.aligned`): each lane puts its operands
// in its 64-byte wide slot, waits for the warp (kiln_sim::warp_collective aborts
// unless all 32 lanes are live and at the same call), reads the other lanes' slots,
// and waits again before leaving. Fragments follow the PTX ISA's layouts, with
// g = lane / 4, q = lane % 4 and the lower-numbered element in a register's low half:
//   A 16x16 (row):  a0 (g, 2q..2q+1)  a1 (g+8, 2q..2q+1)  a2 (g, 2q+8..2q+9)  a3 (g+8, 2q+8..2q+9)
//   B 16x8  (col):  b0 (2q..2q+1, g)  b1 (2q+8..2q+9, g)
//   C, D 16x8 f32:  d0, d1 (g, 2q), (g, 2q+1)   d2, d3 (g+8, 2q), (g+8, 2q+1)
// D = A B + C adds the 16 products to C in k order in f32 (the hardware's order and
// rounding inside a step are its own: compare with tolerances).
// ldmatrix .m8n8.xN.b16: lane i gives the address of row i % 8 of matrix i / 8 (16
// bytes, 16-byte aligned, in shared memory; lanes 8N..31 give none); register j of
// each lane receives row g, elements 2q, 2q+1 of matrix j, or with .trans elements
// (2q, g) and (2q+1, g). Rows are read when the whole warp has arrived.
// movmatrix .m8n8.trans.b16: each lane gives register x, row g, elements 2q, 2q+1 of an
// 8 x 8 matrix, and receives row g, elements 2q, 2q+1 of its transpose: source elements
// (2q, g) and (2q+1, g).
// cp.async: see kiln_sim::cp_async (cuda_sim.h): copies land at the retiring wait,
// visible to the waiting thread only until a __syncthreads (ldmatrix checks).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kiln_sim {

namespace mma_detail {
inline float element(uint32_t reg, int half, __nv_bfloat16*) {
  const uint16_t bits = static_cast<uint16_t>(reg >> (16 * half));
  __nv_bfloat16 v;
  std::memcpy(&v, &bits, 2);
  return __bfloat162float(v);
}
inline float element(uint32_t reg, int half, __half*) {
  const uint16_t bits = static_cast<uint16_t>(reg >> (16 * half));
  __half v;
  std::memcpy(&v, &bits, 2);
  return __half2float(v);
}
inline const uint32_t* lane_regs(unsigned lane) { return reinterpret_cast<const uint32_t*>(warp_wide_slot_of_lane(lane)); }
}  // namespace mma_detail

/** mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32: d = a b + d (T: __nv_bfloat16 or __half). */
template <typename T>
inline void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const char* file, int line) {
  static_assert(std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value, "mma m16n8k16 takes bf16 or f16 operands");
  // Slot: a0..a3 at words 0..3, b0, b1 at words 4, 5.
  uint32_t* mine = reinterpret_cast<uint32_t*>(warp_wide_slot());
  for (int r = 0; r < 4; r++) mine[r] = a[r];
  mine[4] = b[0];
  mine[5] = b[1];
  warp_collective("mma.sync", file, line);
  const unsigned lane = lane_id(), g = lane / 4, q = lane % 4;
  // This lane's rows g, g + 8 of A and columns 2q, 2q + 1 of B, all 16 k, gathered once.
  // A(row, kk): lane 4 (row % 8) + (kk % 8) / 2, register (row >= 8) + 2 (kk >= 8), half kk % 2.
  // B(kk, col): lane 4 col + (kk % 8) / 2, register 4 + (kk >= 8), half kk % 2.
  float a_rows[2][16], b_cols[2][16];
  for (unsigned j = 0; j < 4; j++) {
    const uint32_t* ra = mma_detail::lane_regs(4 * g + j);
    const uint32_t* rb0 = mma_detail::lane_regs(4 * (2 * q) + j);
    const uint32_t* rb1 = mma_detail::lane_regs(4 * (2 * q + 1) + j);
    for (unsigned hi = 0; hi < 2; hi++) {    // kk >= 8
      for (unsigned half = 0; half < 2; half++) {
        const unsigned kk = 8 * hi + 2 * j + half;
        for (unsigned r = 0; r < 2; r++) a_rows[r][kk] = mma_detail::element(ra[r + 2 * hi], half, static_cast<T*>(nullptr));
        b_cols[0][kk] = mma_detail::element(rb0[4 + hi], half, static_cast<T*>(nullptr));
        b_cols[1][kk] = mma_detail::element(rb1[4 + hi], half, static_cast<T*>(nullptr));
      }
    }
  }
  float out[4];
  for (int e = 0; e < 4; e++) {
    const float* ar = a_rows[e >= 2 ? 1 : 0];
    const float* bc = b_cols[e & 1];
    float acc = d[e];
    for (unsigned kk = 0; kk < 16; kk++) acc += ar[kk] * bc[kk];
    out[e] = acc;
  }
  sync_warp(file, line);
  for (int e = 0; e < 4; e++) d[e] = out[e];
}

/** ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16 into r[0..N-1]. */
template <int N, bool TRANS>
inline void ldmatrix(uint32_t* r, const void* row, const char* file, int line) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  const unsigned lane = lane_id(), g = lane / 4, q = lane % 4;
  if (lane < 8 * N) check_access(TRANS ? "ldmatrix.trans row" : "ldmatrix row", row, 16, true, file, line);
  std::memcpy(warp_wide_slot(), &row, sizeof row);
  warp_collective(TRANS ? "ldmatrix.trans" : "ldmatrix", file, line);
  uint32_t out[N];
  for (int j = 0; j < N; j++) {
    uint16_t e[2];
    for (unsigned h = 0; h < 2; h++) {
      const unsigned src_row = TRANS ? 2 * q + h : g, col = TRANS ? g : 2 * q + h;
      const unsigned char* base;
      std::memcpy(&base, warp_wide_slot_of_lane(8 * j + src_row), sizeof base);
      check_landed_visible(TRANS ? "ldmatrix.trans" : "ldmatrix", base, file, line);
      std::memcpy(&e[h], base + 2 * col, 2);
    }
    out[j] = static_cast<uint32_t>(e[0]) | (static_cast<uint32_t>(e[1]) << 16);
  }
  sync_warp(file, line);
  for (int j = 0; j < N; j++) r[j] = out[j];
}

/** movmatrix.sync.aligned.m8n8.trans.b16: this lane's two elements of the transpose. */
inline uint32_t movmatrix_trans(uint32_t x, const char* file, int line) {
  std::memcpy(warp_wide_slot(), &x, sizeof x);
  warp_collective("movmatrix", file, line);
  const unsigned lane = lane_id(), g = lane / 4, q = lane % 4;
  uint32_t out = 0;
  for (unsigned h = 0; h < 2; h++) {
    // Source element (2q + h, g): lane 4 (2q + h) + g / 2, half g % 2.
    const uint32_t src = mma_detail::lane_regs(4 * (2 * q + h) + g / 2)[0];
    out |= ((src >> (16 * (g % 2))) & 0xffffu) << (16 * h);
  }
  sync_warp(file, line);
  return out;
}

}  // namespace kiln_sim
