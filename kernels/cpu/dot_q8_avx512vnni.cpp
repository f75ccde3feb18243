// AVX-512 VNNI (EVEX vpdpbusd, on ymm through AVX-512VL) build of the int8-activation dots: the
// body of dot_q8_avx2.cpp (dot_q8_x86.inc) with u8 x s8 4-sums in one instruction, for CPUs with
// AVX512_VNNI but not AVX-VNNI (Zen 4, Ice Lake, ...). Compiled with the AVX-512 flags of
// dot_avx512.cpp plus -mavx512vnni; called only when the CPU has it. ISA hygiene as dot_q8_avx2.cpp.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"

#define STRATA_Q8_NAME(t) dot_q8_##t##_avx512vnni
#define STRATA_Q8_ROWS_NAME(t) dot_q8_rows_##t##_avx512vnni
#define STRATA_Q8_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#include "kernels/cpu/dot_q8_x86.inc"
