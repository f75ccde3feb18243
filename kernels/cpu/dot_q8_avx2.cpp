// AVX2 int8-activation dots (dot_q8.h): u8 x s8 products with vpmaddubsw, pairs to int32 with
// vpmaddwd, exactly the integer sums and f32 lane order of the scalar reference
// (dot_q8_scalar.cpp). Compiled with -mavx2 -mfma -mf16c; called only when cpu_features().avx2.
//
// Each weight block is decoded once into registers (unsigned codes per 32 elements, scales as
// int32 lanes) and then multiplied with every activation column; per column the K types keep
// eight f32 lanes (one per 32-element group) and the legacy types eight lanes of 4-element sums.
//
// ISA hygiene (as dot_avx2.cpp): nothing here instantiates an inline function shared with other
// translation units: no std::, no member functions of Q8ActView (pointers are computed from its
// fields).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"

#define STRATA_Q8_NAME(t) dot_q8_##t##_avx2
#define STRATA_Q8_ROWS_NAME(t) dot_q8_rows_##t##_avx2
#include "kernels/cpu/dot_q8_x86.inc"

