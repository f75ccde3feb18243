// The QuantKernels rows: one per type of STRATA_CPU_QUANT_TYPES and STRATA_CPU_IQ_TYPES, wired from
// type_kernels.h.
#include <array>

#include "core/cpu_features.h"
#include "kernels/cpu/quant/type_kernels.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::kernels::cpu {
namespace {

// GgmlType of each type suffix of STRATA_CPU_QUANT_TYPES.
constexpr GgmlType type_f32 = GgmlType::F32, type_f16 = GgmlType::F16, type_bf16 = GgmlType::BF16,
                   type_q4_0 = GgmlType::Q4_0, type_q4_1 = GgmlType::Q4_1,
                   type_q5_0 = GgmlType::Q5_0, type_q5_1 = GgmlType::Q5_1,
                   type_q8_0 = GgmlType::Q8_0, type_q2_k = GgmlType::Q2_K,
                   type_q3_k = GgmlType::Q3_K, type_q4_k = GgmlType::Q4_K,
                   type_q5_k = GgmlType::Q5_K, type_q6_k = GgmlType::Q6_K,
                   type_iq2_xxs = GgmlType::IQ2_XXS, type_iq2_xs = GgmlType::IQ2_XS,
                   type_iq2_s = GgmlType::IQ2_S, type_iq3_xxs = GgmlType::IQ3_XXS,
                   type_iq3_s = GgmlType::IQ3_S, type_iq1_s = GgmlType::IQ1_S,
                   type_iq1_m = GgmlType::IQ1_M, type_iq4_nl = GgmlType::IQ4_NL,
                   type_iq4_xs = GgmlType::IQ4_XS;


#define STRATA_KERNEL_ROW(t) \
  QuantKernels{type_##t, dequantize_##t, quantize_##t,                  \
               {dot_##t##_scalar, dot_##t##_avx2, dot_##t##_avx512}, fill_random_##t},
// The i-quants' AVX-512 dots; nullptr where there is none (best_dot then picks AVX2).
#define STRATA_IQ_AVX512(t) constexpr DotFn avx512_##t = dot_##t##_avx512;
STRATA_CPU_IQ_AVX512_TYPES(STRATA_IQ_AVX512)
#undef STRATA_IQ_AVX512
// IQ1_S: an AVX-512 dot in dot_iq_avx512.cpp's scheme measured no faster than AVX2 (5376-element
// row, AMD EPYC Zen 5 VM: 315 vs 309 ns; with the 32 grid indices computed in vector lanes 330 ns,
// with vpgatherdq 475 ns). The random lookups into its 16 KiB grid, not the arithmetic, bound both.
constexpr DotFn avx512_iq1_s = nullptr;
#define STRATA_IQ_KERNEL_ROW(t) \
  QuantKernels{type_##t, dequantize_##t, quantize_##t,                  \
               {dot_##t##_scalar, dot_##t##_avx2, avx512_##t}, fill_random_##t},
constexpr QuantKernels kRows[] = {STRATA_CPU_QUANT_TYPES(STRATA_KERNEL_ROW)
                                  STRATA_CPU_IQ_TYPES(STRATA_IQ_KERNEL_ROW)};
#undef STRATA_KERNEL_ROW
#undef STRATA_IQ_KERNEL_ROW

// GGML type ids are small (< 64); a direct index keeps quant_kernels() a load.
constexpr size_t kMaxTypeId = 64;
constexpr std::array<const QuantKernels*, kMaxTypeId> build_index() {
  std::array<const QuantKernels*, kMaxTypeId> index{};
  for (const QuantKernels& row : kRows) index[size_t(row.type)] = &row;
  return index;
}
constexpr std::array<const QuantKernels*, kMaxTypeId> kIndex = build_index();

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return cpu_features().avx2;
    case Isa::avx512: return cpu_features().avx512;
  }
  return false;
}

const QuantKernels* quant_kernels(GgmlType type) {
  const auto id = size_t(type);
  return id < kMaxTypeId ? kIndex[id] : nullptr;
}

DotFn best_dot(GgmlType type) {
  const QuantKernels* k = quant_kernels(type);
  if (!k) return nullptr;
  for (int isa = kIsaCount - 1; isa > 0; --isa) {
    if (k->dot[isa] && isa_supported(Isa(isa))) return k->dot[isa];
  }
  return k->dot[int(Isa::scalar)];
}

DequantizeFn best_dequantize(GgmlType type) {
  const QuantKernels* k = quant_kernels(type);
  if (!k) return nullptr;
  if (isa_supported(Isa::avx2)) {
    if (type == GgmlType::F16) return dequantize_f16_avx2;
    if (type == GgmlType::Q8_0) return dequantize_q8_0_avx2;
    if (type == GgmlType::Q4_1) return dequantize_q4_1_avx2;
  }
  return k->dequantize;
}

}  // namespace strata::kernels::cpu
