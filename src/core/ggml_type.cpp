#include "core/ggml_type.h"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "core/status.h"

namespace strata {
namespace {

// Block sizes and bytes per block are format facts (ggml's type traits).
constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "f32", 1, 4, true},
    {GgmlType::F16, "f16", 1, 2, true},
    {GgmlType::Q4_0, "q4_0", 32, 18, true},
    {GgmlType::Q4_1, "q4_1", 32, 20, true},
    {GgmlType::Q5_0, "q5_0", 32, 22, true},
    {GgmlType::Q5_1, "q5_1", 32, 24, true},
    {GgmlType::Q8_0, "q8_0", 32, 34, true},
    {GgmlType::Q8_1, "q8_1", 32, 36, false},
    {GgmlType::Q2_K, "q2_K", 256, 84, true},
    {GgmlType::Q3_K, "q3_K", 256, 110, true},
    {GgmlType::Q4_K, "q4_K", 256, 144, true},
    {GgmlType::Q5_K, "q5_K", 256, 176, true},
    {GgmlType::Q6_K, "q6_K", 256, 210, true},
    {GgmlType::Q8_K, "q8_K", 256, 292, false},
    {GgmlType::IQ2_XXS, "iq2_xxs", 256, 66, true},
    {GgmlType::IQ2_XS, "iq2_xs", 256, 74, true},
    {GgmlType::IQ3_XXS, "iq3_xxs", 256, 98, true},
    {GgmlType::IQ1_S, "iq1_s", 256, 50, true},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 18, true},
    {GgmlType::IQ3_S, "iq3_s", 256, 110, true},
    {GgmlType::IQ2_S, "iq2_s", 256, 82, true},
    {GgmlType::IQ4_XS, "iq4_xs", 256, 136, true},
    {GgmlType::I8, "i8", 1, 1, false},
    {GgmlType::I16, "i16", 1, 2, false},
    {GgmlType::I32, "i32", 1, 4, false},
    {GgmlType::I64, "i64", 1, 8, false},
    {GgmlType::F64, "f64", 1, 8, false},
    {GgmlType::IQ1_M, "iq1_m", 256, 56, true},
    {GgmlType::BF16, "bf16", 1, 2, true},
    {GgmlType::TQ1_0, "tq1_0", 256, 54, false},
    {GgmlType::TQ2_0, "tq2_0", 256, 66, false},
};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (uint32_t(t.type) == id) return t;
  return std::nullopt;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  STRATA_CHECK(false, "GgmlType {} missing from the type table", uint32_t(type));
  __builtin_unreachable();
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
    return r;
  };
  const std::string want = lower(name);
  for (const auto& t : kTypes)
    if (lower(t.name) == want) return t.type;
  return std::nullopt;
}

uint64_t ggml_row_bytes(GgmlType type, uint64_t n) {
  const auto& info = ggml_type_info(type);
  STRATA_CHECK(n % info.block_size == 0, "row of {} elements is not a multiple of {}'s block size {}",
               n, info.name, info.block_size);
  return n / info.block_size * info.type_size;
}

}  // namespace strata
