// The native matmul and FMA ceiling on AVX-512F vectors (16 f32 lanes); this file alone is
// compiled with -mavx512f -mfma -mf16c (CMakeLists.txt), and runs only where cpu_isa.cc
// found AVX-512F and an OS that saves its registers.
#if defined(__x86_64__) || defined(_M_X64)
#include "simd_avx512.h"
#include "nest_entry.h"

namespace kiln_native {

const IsaKernels& avx512_kernels() {
  static const IsaKernels kernels = isa_kernels<Avx512>();
  return kernels;
}

}  // namespace kiln_native
#endif
