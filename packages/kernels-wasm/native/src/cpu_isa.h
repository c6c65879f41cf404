// Which of the native kernels' instruction sets this CPU and its operating system run.
#ifndef KILN_NATIVE_CPU_ISA_H
#define KILN_NATIVE_CPU_ISA_H

namespace kiln_native {

struct CpuIsas {
  bool avx512;  // AVX-512F with FMA and F16C, zmm and mask registers saved by the OS
  bool avx2;    // AVX2 with FMA and F16C, ymm registers saved by the OS
  bool neon;    // AArch64 Advanced SIMD: on every AArch64 CPU
};

CpuIsas detect_cpu_isas();

}  // namespace kiln_native

#endif
