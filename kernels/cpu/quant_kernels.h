// The CPU compute for each GGML type: one row per type (see core/ggml_type.h for the sizes).
//
// Activation precision: dot products take f32 activations and accumulate in f32; weights are
// decoded exactly (every quantised value is exactly representable in f32). So the only error of a
// dot versus exact math is f32 rounding of the sum, which tests bound by ~n * eps * sum|w*x|.
// (llama.cpp instead quantises activations to 8 bits; strata keeps them f32 so that the CPU engine
// can serve as an exact reference for every other backend.)
//
// Thread-safety: all functions are pure on their arguments. n is the element count of a row and
// must be a multiple of the type's block size (callers validate shapes at the boundary).
// Alignment: rows are 4-byte aligned for f32 and 2-byte aligned for every other type (GGUF data
// is 32-byte aligned and every block size is even); nothing beyond that is assumed (the SIMD
// kernels use unaligned vector loads). Activations are float-aligned.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"
#include "core/rng.h"

namespace strata::kernels::cpu {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };
inline constexpr int kIsaCount = 3;
const char* isa_name(Isa isa);
bool isa_supported(Isa isa);  // by this CPU (and the STRATA_CPU cap)

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
using DotFn = float (*)(const void* row, const float* x, int64_t n);
// Fills n elements' worth of blocks with random codes and scales whose dequantised values have
// mean ~0 and standard deviation ~std (synthetic weights straight in the quantised domain: far
// faster than generating floats and quantising them, and exactly as "real" for random weights).
using FillRandomFn = void (*)(void* dst, int64_t n, Rng& rng, float std);

struct QuantKernels {
  GgmlType type;
  DequantizeFn dequantize;  // exact decode (matches ggml's to_float bit for bit)
  QuantizeFn quantize;      // reference quantiser (error on par with ggml's)
  DotFn dot[kIsaCount];     // indexed by Isa; nullptr where that ISA has no kernel
  FillRandomFn fill_random;
};

// nullptr when strata has no CPU kernels for the type.
const QuantKernels* quant_kernels(GgmlType type);
// The fastest dot kernel this CPU supports for the type (scalar always exists).
DotFn best_dot(GgmlType type);
// The fastest decoder of a row to f32 this CPU supports: the same values as `dequantize` (f16,
// q8_0 and q4_1 -- the KV cache's types -- have AVX2 ones; every other type returns `dequantize`).
// nullptr where the type has no kernels.
DequantizeFn best_dequantize(GgmlType type);

}  // namespace strata::kernels::cpu
