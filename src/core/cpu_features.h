// What the CPU we run on supports, read once via cpuid (+ xgetbv: the OS must save the registers).
#pragma once

namespace strata {

struct CpuFeatures {
  bool avx2 = false;     // with FMA and F16C: our "avx2" kernel level
  bool avx512 = false;   // F + BW + VL + DQ: our "avx512" kernel level
};

const CpuFeatures& cpu_features();

}  // namespace strata
