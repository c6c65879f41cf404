// The native matmul, FMA ceiling, attention, GELU and norms on NEON vectors (4 f32 lanes).
// Advanced SIMD and the fused multiply-add are part of every AArch64 CPU, so this file
// needs no target flags (CMakeLists.txt) and cpu_isa.cc reports it on every one.
#if defined(__aarch64__)
#include "simd_neon.h"
#include "nest_entry.h"

namespace kiln_native {

const IsaKernels& neon_kernels() {
  static const IsaKernels kernels = isa_kernels<Neon>();
  return kernels;
}

}  // namespace kiln_native
#endif
