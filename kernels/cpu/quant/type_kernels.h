// Declarations of every per-type CPU kernel, named <op>_<type>[_<isa>]. The table in
// quant_table.cpp wires them into QuantKernels rows. Scalar kernels live in float_types.cpp,
// legacy_types.cpp (Q4_0..Q8_0), k_types.cpp (Q2_K..Q6_K) and iq_types.cpp (the i-quants); SIMD dots in dot_avx2.cpp and
// dot_avx512.cpp (compiled with their ISA flags, called only when the CPU has the ISA).
#pragma once

#include <cstdint>

#include "core/rng.h"

// X(type suffix): the types with CPU kernels.
#define STRATA_CPU_QUANT_TYPES(X) \
  X(f32) X(f16) X(bf16) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k)

namespace strata::kernels::cpu {

#define STRATA_DECLARE_TYPE_KERNELS(t)                                      \
  void dequantize_##t(const void* src, float* dst, int64_t n);              \
  void quantize_##t(const float* src, void* dst, int64_t n);                \
  float dot_##t##_scalar(const void* row, const float* x, int64_t n);       \
  float dot_##t##_avx2(const void* row, const float* x, int64_t n);         \
  float dot_##t##_avx512(const void* row, const float* x, int64_t n);       \
  void fill_random_##t(void* dst, int64_t n, Rng& rng, float std);
STRATA_CPU_QUANT_TYPES(STRATA_DECLARE_TYPE_KERNELS)
#undef STRATA_DECLARE_TYPE_KERNELS

// X(type suffix): the i-quants (iq_types.cpp; SIMD dots in dot_iq_avx2.cpp and dot_iq_avx512.cpp).
// Their quantisers (iq4_quant.cpp, iq_grid_quant.cpp) are the importance-free entry
// points of iq_quant.h's weighted ones.
#define STRATA_CPU_IQ_TYPES(X) \
  X(iq2_xxs) X(iq2_xs) X(iq2_s) X(iq3_xxs) X(iq3_s) X(iq1_s) X(iq1_m) X(iq4_nl) X(iq4_xs)

#define STRATA_DECLARE_IQ_KERNELS(t)                                        \
  void dequantize_##t(const void* src, float* dst, int64_t n);              \
  float dot_##t##_scalar(const void* row, const float* x, int64_t n);       \
  float dot_##t##_avx2(const void* row, const float* x, int64_t n);         \
  void fill_random_##t(void* dst, int64_t n, Rng& rng, float std);
STRATA_CPU_IQ_TYPES(STRATA_DECLARE_IQ_KERNELS)
#undef STRATA_DECLARE_IQ_KERNELS
// X(type suffix): the i-quants with an AVX-512 dot (dot_iq_avx512.cpp); iq1_s has none (see
// quant_table.cpp: it measured no faster than its AVX2 dot).
#define STRATA_CPU_IQ_AVX512_TYPES(X) \
  X(iq2_xxs) X(iq2_xs) X(iq2_s) X(iq3_xxs) X(iq3_s) X(iq1_m) X(iq4_nl) X(iq4_xs)
#define STRATA_DECLARE_IQ_AVX512(t) float dot_##t##_avx512(const void* row, const float* x, int64_t n);
STRATA_CPU_IQ_AVX512_TYPES(STRATA_DECLARE_IQ_AVX512)
#undef STRATA_DECLARE_IQ_AVX512
#define STRATA_DECLARE_IQ_QUANTIZE(t) void quantize_##t(const float* src, void* dst, int64_t n);
STRATA_CPU_IQ_TYPES(STRATA_DECLARE_IQ_QUANTIZE)
#undef STRATA_DECLARE_IQ_QUANTIZE

// SIMD decoders where the scalar one is slow (see best_dequantize; dequantize_avx2.cpp).
void dequantize_f16_avx2(const void* src, float* dst, int64_t n);
void dequantize_q8_0_avx2(const void* src, float* dst, int64_t n);
void dequantize_q4_1_avx2(const void* src, float* dst, int64_t n);

}  // namespace strata::kernels::cpu
