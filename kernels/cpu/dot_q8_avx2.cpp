// AVX2 int8-activation dots (dot_q8.h): u8 x s8 products with vpmaddubsw, pairs to int32 with
// vpmaddwd, exactly the integer sums and f32 lane order of the scalar reference
// (dot_q8_scalar.cpp). Compiled with -mavx2 -mfma -mf16c; called only when cpu_features().avx2.
//
// Each weight block is decoded once into registers, in q8_act.h's lane order (dot_q8_x86.inc), and
// then multiplied with every activation column; per column the K types keep eight f32 lanes (one
// per 32-element group) and the blocks of 32 eight lanes (block b in lane b mod 8). Up to 4
// vpmaddubsw results share int16 lanes before one vpmaddwd by the scales, where the codes allow.
//
// ISA hygiene (as dot_avx2.cpp): nothing here instantiates an inline function shared with other
// translation units: no std::, no member functions of Q8ActView (pointers are computed from its
// fields).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/dot_q8_scales.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"

#define STRATA_Q8_NAME(t) dot_q8_##t##_avx2
#define STRATA_Q8_ROWS_NAME(t) dot_q8_rows_##t##_avx2
#include "kernels/cpu/dot_q8_x86.inc"

