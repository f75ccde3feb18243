// AVX-VNNI (VEX vpdpbusd on ymm) build of the int8-activation dots: the body of dot_q8_avx2.cpp
// (dot_q8_x86.inc) with u8 x s8 4-sums in one instruction. Compiled with -mavx2 -mfma -mf16c
// -mavxvnni; called only when the CPU has AVX-VNNI (dot_q8_scalar.cpp, q8_isa_supported). ISA
// hygiene as dot_q8_avx2.cpp.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/dot_q8_scales.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"

#define STRATA_Q8_NAME(t) dot_q8_##t##_avxvnni
#define STRATA_Q8_ROWS_NAME(t) dot_q8_rows_##t##_avxvnni
#define STRATA_Q8_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#include "kernels/cpu/dot_q8_x86.inc"
