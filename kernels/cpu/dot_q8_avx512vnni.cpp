// AVX-512 VNNI build of the int8-activation dots: for 3 or more columns the 512-bit body
// (dot_q8_zmm.inc, two columns per register), for fewer the body of dot_q8_avx2.cpp
// (dot_q8_x86.inc) with EVEX vpdpbusd on ymm. Preferred to AVX-VNNI where a CPU has both (dot_q8_scalar.cpp's
// best_dot_q8_isa). Compiled with the AVX-512 flags of dot_avx512.cpp plus -mavx512vnni; called
// only when the CPU has it. ISA hygiene as dot_q8_avx2.cpp.
// GCC 12 flags the placeholder inside its own AVX-512 intrinsics (_mm512_undefined_*) as
// (maybe-)uninitialized once inlined; spurious, as in dot_avx512.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/dot_q8_scales.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"

#define STRATA_Q8_NAME(t) dot_q8_##t##_avx512vnni
#define STRATA_Q8_ROWS_NAME(t) dot_q8_rows_##t##_avx512vnni
#define STRATA_Q8_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#define STRATA_Q8_ZMM 1  // the 512-bit body (dot_q8_zmm.inc) for the exported kernels
#include "kernels/cpu/dot_q8_x86.inc"
