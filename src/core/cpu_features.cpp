#include "core/cpu_features.h"

#include <cpuid.h>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace strata {
namespace {

uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_saved = (xcr0 & 0x6) == 0x6, zmm_saved = (xcr0 & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = b & (1u << 5);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30),
             avx512vl = b & (1u << 31);
  f.avx2 = ymm_saved && avx2 && fma && f16c;
  f.avx512 = f.avx2 && zmm_saved && avx512f && avx512dq && avx512bw && avx512vl;
  // STRATA_CPU=scalar|avx2 caps the level (for testing and for comparing kernels).
  if (const char* cap = std::getenv("STRATA_CPU")) {
    const std::string_view s(cap);
    if (s == "scalar") f.avx2 = f.avx512 = false;
    if (s == "avx2") f.avx512 = false;
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace strata
