// cpuid and xgetbv: an instruction set counts only when the CPU has it and the OS saves
// its registers across context switches (XCR0), else its first instruction faults. On
// AArch64 NEON is part of the architecture (and its registers always saved): nothing to ask.
#include "cpu_isa.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#include <stdint.h>
#endif

namespace kiln_native {

#if defined(__x86_64__) || defined(_M_X64)
static uint64_t xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

CpuIsas detect_cpu_isas() {
  CpuIsas isas{false, false, false};
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return isas;
  const bool osxsave = ecx & (1u << 27), fma = ecx & (1u << 12), f16c = ecx & (1u << 29);
  if (!osxsave || !fma || !f16c) return isas;
  const uint64_t xcr = xcr0();
  const bool ymm_saved = (xcr & 0x6) == 0x6;          // SSE and AVX state
  const bool zmm_saved = (xcr & 0xe6) == 0xe6;        // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return isas;
  isas.avx2 = ymm_saved && (ebx & (1u << 5));
  isas.avx512 = isas.avx2 && zmm_saved && (ebx & (1u << 16));
  return isas;
}
#elif defined(__aarch64__)
CpuIsas detect_cpu_isas() { return CpuIsas{false, false, true}; }
#else
CpuIsas detect_cpu_isas() { return CpuIsas{false, false, false}; }
#endif

}  // namespace kiln_native
