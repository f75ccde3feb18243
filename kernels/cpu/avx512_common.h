// Helpers of the AVX-512 kernel files (dot_avx512.cpp, dot_iq_avx512.cpp). Include only from files
// compiled with the AVX-512 flags (F + BW + VL + DQ). Everything is in an anonymous namespace on
// purpose: each including translation unit gets its own internal copy, so no AVX-512 body can be
// picked by the linker for code that runs on CPUs without AVX-512 (avx2_common.h's reasoning).
#pragma once

// GCC 12 flags the deliberate self-initialised placeholder inside its own AVX-512 intrinsics
// (_mm512_undefined_*) as (maybe-)uninitialized once they are inlined; the warning is spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/unaligned_load.h"

// Small constant-trip loops must be fully unrolled (-O2 does not), so that shift counts are
// immediates and arrays of vectors stay in registers.
#define STRATA_UNROLL _Pragma("GCC unroll 16")

namespace strata::kernels::cpu {
namespace {

using u8 = uint8_t;

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }
inline float f16(uint16_t h) { return _cvtsh_ss(h); }
inline float load_f16(const void* p) { return f16(load_u16(p)); }
inline __m512 ld(const float* x) { return _mm512_loadu_ps(x); }
inline __m512 bcast(float v) { return _mm512_set1_ps(v); }

}  // namespace
}  // namespace strata::kernels::cpu
