// The native matmul and FMA ceiling on AVX2 vectors (8 f32 lanes); this file alone is
// compiled with -mavx2 -mfma -mf16c (CMakeLists.txt), and runs only where cpu_isa.cc found
// AVX2, FMA and F16C and an OS that saves the ymm registers.
#if defined(__x86_64__) || defined(_M_X64)
#include "simd_avx2.h"
#include "nest_entry.h"

namespace kiln_native {

const IsaKernels& avx2_kernels() {
  static const IsaKernels kernels = isa_kernels<Avx2>();
  return kernels;
}

}  // namespace kiln_native
#endif
