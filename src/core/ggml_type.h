// Facts about GGML tensor types: id (as stored in GGUF), name, elements per block, bytes per block.
// Pure data, so that the GGUF reader, the planner and the report can size tensors without kernels.
// The compute for each type (dequantise, quantise, dot) is a row in kernels/cpu/quant_kernels.h;
// adding a type is adding a row here and there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;     // as llama.cpp prints it: "q4_K", "f16"
  uint32_t block_size;       // elements per block
  uint32_t type_size;        // bytes per block
  bool has_cpu_kernels;      // strata can dequantise / dot it (kernels/cpu)
};

// nullptr-free lookup: nullopt for an id GGML does not define (or strata does not know).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
// Case-insensitive name lookup ("q4_k", "Q4_K", "f32").
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers that
// read untrusted shapes, asserted here).
uint64_t ggml_row_bytes(GgmlType type, uint64_t n);

}  // namespace strata
