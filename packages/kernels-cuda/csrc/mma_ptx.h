// mma_ptx.h: thin wrappers over the sm_80 tensor-core and async-copy instructions
// that matmul_mma.cu uses. Under nvcc each is one inline PTX instruction; under the
// simulator (KILN_CUDA_SIM) sim/mma_sim.h emulates them with the PTX ISA's fragment
// layouts (documented there) and cp.async's commit/wait groups (cuda_sim.h):
//   mma_m16n8k16<T>(d, a, b)   mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32, d += a b
//                              (T: __nv_bfloat16 or __half; a: 4 regs, b: 2 regs, d: 4 f32)
//   ldmatrix_x{2,4}[_trans](r, row)  ldmatrix.sync.aligned.m8n8.x{2,4}[.trans].shared.b16;
//                              `row`: this lane's row address (generic pointer to shared memory)
//   movmatrix_trans(x)         movmatrix.sync.aligned.m8n8.trans.b16: x holds row g, elements
//                              2q, 2q+1 of an 8 x 8 matrix; returns the same of its transpose
//   cp_async_16(dst, src, n)   cp.async.cg.shared.global 16 bytes, of which the first n
//                              (0..16) come from src and the rest are zero
//   cp_async_commit()          cp.async.commit_group
//   cp_async_wait<N>()         cp.async.wait_group N: at most N of this thread's groups pending
// Under the simulator every wrapper takes the call site as defaulted trailing
// arguments, so a divergent or misaligned call is reported at its line.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kiln_cuda.h"

#if defined(KILN_CUDA_SIM)
#include "sim/mma_sim.h"
#define KILN_PTX_SITE , const char *site_file = __builtin_FILE(), int site_line = __builtin_LINE()
#else
#define KILN_PTX_SITE
#endif

namespace kiln {
namespace ptx {

#if !defined(KILN_CUDA_SIM)
__device__ __forceinline__ unsigned shared_address(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
#endif

template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2] KILN_PTX_SITE) {
  static_assert(std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value, "mma m16n8k16 takes bf16 or f16 operands");
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::mma_m16n8k16<T>(d, a, b, site_file, site_line);
#else
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row KILN_PTX_SITE) {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::ldmatrix<4, false>(r, row, site_file, site_line);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row KILN_PTX_SITE) {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::ldmatrix<4, true>(r, row, site_file, site_line);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
#endif
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row KILN_PTX_SITE) {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::ldmatrix<2, false>(r, row, site_file, site_line);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(shared_address(row)) : "memory");
#endif
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row KILN_PTX_SITE) {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::ldmatrix<2, true>(r, row, site_file, site_line);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(shared_address(row)) : "memory");
#endif
}

/** 16 bytes global -> shared, asynchronously; bytes [src_bytes, 16) of dst are zero. Both 16-byte aligned. */
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x KILN_PTX_SITE) {
#if defined(KILN_CUDA_SIM)
  return ::kiln_sim::movmatrix_trans(x, site_file, site_line);
#else
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
#endif
}

__device__ __forceinline__ void cp_async_16(void* dst, const void* src, unsigned src_bytes KILN_PTX_SITE) {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::cp_async(dst, src, src_bytes, site_file, site_line);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/** Waits until at most N of this thread's committed groups are pending (their copies visible to this thread). */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(KILN_CUDA_SIM)
  ::kiln_sim::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace ptx
}  // namespace kiln

#undef KILN_PTX_SITE
