// wgmma_ptx.h: thin wrappers over the sm_90a warpgroup matrix instructions that
// matmul_wgmma.cu uses. Under nvcc each is inline PTX, compiled only where
// __CUDA_ARCH_FEAT_SM90_ALL is defined (the sm_90a build); under the simulator
// (KILN_CUDA_SIM) sim/wgmma_sim.h emulates them (descriptor, swizzle and fragment
// layouts documented there):
//   wgmma_desc_sw128(p, lbo, sbo)   a shared-memory matrix descriptor with the 128-byte
//                                   swizzle (p: generic pointer into dynamic shared memory)
//   wgmma_m64k16<T, N, MA, MB>(d, da, db)
//                                   wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T, d += A B
//                                   (N 64, 128 or 256, d: N / 2 f32 per thread; MA / MB: A / B
//                                   stored MN-major, the instruction's imm-trans-a / -b)
//   wgmma_m64k16_ra<T, N, MB>(d, a, db)
//                                   the same with A from registers: a, this thread's four
//                                   32-bit registers of its warp's 16 rows, laid out as
//                                   mma.m16n8k16's A fragment (N 64 or 128)
//   operand_fence(a)                keeps the compiler from reusing a register A operand's
//                                   registers before the wgmma that reads them is retired
//   wgmma_fence()                   wgmma.fence.sync.aligned (before the first wgmma that
//                                   reads accumulators other instructions wrote)
//   wgmma_commit()                  wgmma.commit_group.sync.aligned
//   wgmma_wait<N>()                 wgmma.wait_group.sync.aligned N
//   fence_proxy_async()             fence.proxy.async.shared::cta (cp.async bytes in shared
//                                   memory ordered before the wgmma reads of them)
//   accumulator_fence(d)            keeps the compiler from moving reads or writes of d
//                                   across the asynchronous wgmma (no instruction)
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kiln_cuda.h"
#include "mma_ptx.h"

#if defined(KILN_CUDA_SIM)
#include "sim/wgmma_sim.h"
#define KILN_WGMMA_SITE , const char *site_file = __builtin_FILE(), int site_line = __builtin_LINE()
#else
#define KILN_WGMMA_SITE
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(KILN_CUDA_SIM)
#define KILN_HAS_WGMMA 1
#endif

namespace kiln {
namespace ptx {

/** Descriptor of a matrix at `p` in dynamic shared memory, 128-byte swizzle, base offset 0 (p's atom 1024-aligned). */
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* p, unsigned lbo_bytes, unsigned sbo_bytes) {
#if defined(KILN_CUDA_SIM)
  const auto addr = static_cast<uint64_t>(static_cast<const unsigned char*>(p) - static_cast<const unsigned char*>(::kiln_sim::dynamic_shared_memory()));
#else
  const uint64_t addr = shared_address(p);
#endif
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{(lbo_bytes >> 4) & 0x3FFF} << 16) | (uint64_t{(sbo_bytes >> 4) & 0x3FFF} << 32) | (uint64_t{1} << 62);
}

template <int R>
__device__ __forceinline__ void accumulator_fence(float (&d)[R]) {
#if !defined(KILN_CUDA_SIM)
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

// The 32 accumulator operands of an m64n64k16.
#define KILN_WGMMA_D32_REGS \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, " \
  "%26, %27, %28, %29, %30, %31"
#define KILN_WGMMA_D32_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
// The 64 accumulator operands of an m64n128k16.
#define KILN_WGMMA_D64_REGS \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, " \
  "%26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, " \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KILN_WGMMA_D64_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
// The 128 accumulator operands of an m64n256k16: the first 64, then 64 more.
#define KILN_WGMMA_D128_REGS \
  KILN_WGMMA_D64_REGS ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, " \
  "%88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, " \
  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define KILN_WGMMA_D128_OPERANDS \
  KILN_WGMMA_D64_OPERANDS, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// One wgmma.mma_async m64n<n>k16 with f32 accumulators d (r of them, operands %0..%r-1),
// descriptors %r, %r+1, scale-d %r+2 (1: D += A B), imm-trans-a %r+3, imm-trans-b %r+4.
#define KILN_WGMMA_ASM(n, ty, r, r1, r2, r3, r4)                                                    \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #r2 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #n "k16.f32." #ty \
  "." #ty " {" KILN_WGMMA_D##r##_REGS "}, %" #r ", %" #r1 ", p, 1, 1, %" #r3 ", %" #r4 ";\n}\n"

// The same with A from registers: %r..%r+3 the A fragment, %r+4 B's descriptor, %r+5 scale-d, %r+6 imm-trans-b.
#define KILN_WGMMA_RA_ASM(n, ty, r, a0, a1, a2, a3, rb, r2, r4)                                      \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #r2 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #n "k16.f32." #ty \
  "." #ty " {" KILN_WGMMA_D##r##_REGS "}, {%" #a0 ", %" #a1 ", %" #a2 ", %" #a3 "}, %" #rb ", p, 1, 1, %" #r4 ";\n}\n"

/** d (64 x N f32, this thread's fragment) += A (64 x 16) B (16 x N), both in shared memory (descriptors da, db). */
template <typename T, int N, bool MN_MAJOR_A, bool MN_MAJOR_B>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t da, uint64_t db KILN_WGMMA_SITE) {
  static_assert(std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value, "wgmma takes bf16 or f16 operands here");
  static_assert(N == 64 || N == 128 || N == 256, "wgmma m64nNk16 with N 64, 128 or 256");
#if defined(KILN_CUDA_SIM)
  // Slot: the two descriptors, which must be the same in every thread of the warpgroup.
  uint64_t* mine = reinterpret_cast<uint64_t*>(::kiln_sim::warp_wide_slot());
  mine[0] = da;
  mine[1] = db;
  ::kiln_sim::warpgroup_collective("wgmma.mma_async", 2 * sizeof(uint64_t), site_file, site_line);
  ::kiln_sim::wgmma_issue(::kiln_sim::WgmmaOp{&::kiln_sim::run_wgmma<T, N, MN_MAJOR_A, MN_MAJOR_B>, da, db, d, threadIdx.x % 128, true, site_file, site_line});
  ::kiln_sim::warpgroup_barrier(site_file, site_line);
#elif defined(KILN_HAS_WGMMA)
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
#define KILN_WGMMA_CALL(n, ty, r, r1, r2, r3, r4) \
  asm volatile(KILN_WGMMA_ASM(n, ty, r, r1, r2, r3, r4) : KILN_WGMMA_D##r##_OPERANDS : "l"(da), "l"(db), "r"(1), "n"(int{MN_MAJOR_A}), "n"(int{MN_MAJOR_B}))
  if constexpr (N == 256 && kBf16) KILN_WGMMA_CALL(256, bf16, 128, 129, 130, 131, 132);
  else if constexpr (N == 256) KILN_WGMMA_CALL(256, f16, 128, 129, 130, 131, 132);
  else if constexpr (N == 128 && kBf16) KILN_WGMMA_CALL(128, bf16, 64, 65, 66, 67, 68);
  else if constexpr (N == 128) KILN_WGMMA_CALL(128, f16, 64, 65, 66, 67, 68);
  else if constexpr (kBf16) KILN_WGMMA_CALL(64, bf16, 32, 33, 34, 35, 36);
  else KILN_WGMMA_CALL(64, f16, 32, 33, 34, 35, 36);
#undef KILN_WGMMA_CALL
#else
  (void)d;
  (void)da;
  (void)db;
#endif
}

/** d (64 x N f32, this thread's fragment) += A (64 x 16, registers: this thread's fragment a) B (16 x N, shared memory, descriptor db). */
template <typename T, int N, bool MN_MAJOR_B>
__device__ __forceinline__ void wgmma_m64k16_ra(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db KILN_WGMMA_SITE) {
  static_assert(std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value, "wgmma takes bf16 or f16 operands here");
  static_assert(N == 64 || N == 128, "wgmma m64nNk16 with A from registers: N 64 or 128");
#if defined(KILN_CUDA_SIM)
  // Slot: B's descriptor (the same in every thread of the warpgroup), then this thread's A registers.
  unsigned char* mine = ::kiln_sim::warp_wide_slot();
  std::memcpy(mine, &db, sizeof db);
  std::memcpy(mine + sizeof db, a, sizeof a);
  ::kiln_sim::warpgroup_collective("wgmma.mma_async", sizeof db, site_file, site_line);
  ::kiln_sim::WgmmaOp op{&::kiln_sim::run_wgmma_register_a<T, N, MN_MAJOR_B>, 0, db, d, threadIdx.x % 128, true, site_file, site_line, {}};
  const unsigned quad0 = (threadIdx.x % 32) / 4 * 4;
  uint32_t quad[4][4];
  for (unsigned q = 0; q < 4; q++) std::memcpy(quad[q], ::kiln_sim::warp_wide_slot_of_lane(quad0 + q) + sizeof db, sizeof quad[q]);
  ::kiln_sim::gather_register_rows<T>(op.a_rows, quad);
  ::kiln_sim::wgmma_issue(op);
  ::kiln_sim::warpgroup_barrier(site_file, site_line);
#elif defined(KILN_HAS_WGMMA)
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
#define KILN_WGMMA_RA_CALL(n, ty, r, a0, a1, a2, a3, rb, r2, r4)                                                                  \
  asm volatile(KILN_WGMMA_RA_ASM(n, ty, r, a0, a1, a2, a3, rb, r2, r4)                                                          \
               : KILN_WGMMA_D##r##_OPERANDS                                                                                      \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(int{MN_MAJOR_B}))
  if constexpr (N == 128 && kBf16) KILN_WGMMA_RA_CALL(128, bf16, 64, 64, 65, 66, 67, 68, 69, 70);
  else if constexpr (N == 128) KILN_WGMMA_RA_CALL(128, f16, 64, 64, 65, 66, 67, 68, 69, 70);
  else if constexpr (kBf16) KILN_WGMMA_RA_CALL(64, bf16, 32, 32, 33, 34, 35, 36, 37, 38);
  else KILN_WGMMA_RA_CALL(64, f16, 32, 32, 33, 34, 35, 36, 37, 38);
#undef KILN_WGMMA_RA_CALL
#else
  (void)d;
  (void)a;
  (void)db;
#endif
}

template <int R>
__device__ __forceinline__ void operand_fence(uint32_t (&a)[R]) {
#if !defined(KILN_CUDA_SIM)
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+r"(a[i])::"memory");
#else
  (void)a;
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#if defined(KILN_HAS_WGMMA) && !defined(KILN_CUDA_SIM)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::wgmma_commit();
#elif defined(KILN_HAS_WGMMA)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/** Waits until at most N of this warpgroup's committed wgmma groups are pending (their accumulators written). */
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::wgmma_wait(N);
#elif defined(KILN_HAS_WGMMA)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ void fence_proxy_async() {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::fence_proxy_async();
#elif defined(KILN_HAS_WGMMA)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace ptx
}  // namespace kiln

#undef KILN_WGMMA_SITE
