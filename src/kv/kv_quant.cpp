#include "kv/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::kv {
namespace {

using kernels::cpu::BlockQ4_1;
using kernels::cpu::BlockQ8_0;

constexpr uint16_t kF16Max = 0x7bff, kF16Lowest = 0xfbff;

uint16_t saturate(uint16_t h) {
  if ((h & 0x7fffu) >= 0x7c00u) return (h & 0x8000u) ? kF16Lowest : kF16Max;  // inf (x is finite)
  return h;
}

// The f16 one step above / below h (h finite; -0 and +0 both step to the smallest subnormals).
uint16_t f16_next_up(uint16_t h) {
  if (h == kF16Max) return h;
  if (h & 0x8000u) return h == 0x8000u ? uint16_t(0x0001) : uint16_t(h - 1);
  return uint16_t(h + 1);
}
uint16_t f16_next_down(uint16_t h) {
  if (h == kF16Lowest) return h;
  if (h & 0x8000u) return uint16_t(h + 1);
  return h == 0 ? uint16_t(0x8001) : uint16_t(h - 1);
}

void quantize_q8_0(const float* x, BlockQ8_0* b, uint32_t n) {
  for (uint32_t i = 0; i < n / kKvGroup; ++i, x += kKvGroup) {
    float amax = 0.0f;
    for (uint32_t j = 0; j < kKvGroup; ++j) amax = std::max(amax, std::fabs(x[j]));
    const uint16_t dh = f16_round_up(amax / 127.0f);
    const float d = f16_to_f32(dh);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    b[i].d = dh;
    for (uint32_t j = 0; j < kKvGroup; ++j) b[i].qs[j] = int8_t(std::clamp(std::round(x[j] * id), -127.0f, 127.0f));
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* b, uint32_t n) {
  for (uint32_t i = 0; i < n / kKvGroup; ++i, x += kKvGroup) {
    float mn = x[0], mx = x[0];
    for (uint32_t j = 1; j < kKvGroup; ++j) {
      mn = std::min(mn, x[j]);
      mx = std::max(mx, x[j]);
    }
    mn += 0.0f;  // -0 -> +0: the min's sign of zero must not depend on the order (CUDA reduces in another)
    const uint16_t mh = f16_round_down(mn);
    const float m = f16_to_f32(mh);
    const uint16_t dh = f16_round_up((mx - m) / 15.0f);
    const float d = f16_to_f32(dh);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    b[i].d = dh;
    b[i].m = mh;
    uint8_t q[kKvGroup];
    for (uint32_t j = 0; j < kKvGroup; ++j) q[j] = uint8_t(std::clamp(std::round((x[j] - m) * id), 0.0f, 15.0f));
    // ggml's nibble order: low nibbles hold values 0..15, high nibbles 16..31.
    for (uint32_t j = 0; j < kKvGroup / 2; ++j) b[i].qs[j] = uint8_t(q[j] | (q[j + kKvGroup / 2] << 4));
  }
}

}  // namespace

uint16_t f16_round_up(float x) {
  uint16_t h = saturate(f32_to_f16(x));
  if (f16_to_f32(h) < x) h = f16_next_up(h);
  return h;
}

uint16_t f16_round_down(float x) {
  uint16_t h = saturate(f32_to_f16(x));
  if (f16_to_f32(h) > x) h = f16_next_down(h);
  return h;
}

bool kv_type_supported(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_1;
}

std::optional<GgmlType> kv_type_from_name(std::string_view name) {
  if (name == "f32") return GgmlType::F32;
  if (name == "f16") return GgmlType::F16;
  if (name == "q8" || name == "q8_0") return GgmlType::Q8_0;
  if (name == "q4" || name == "q4_1") return GgmlType::Q4_1;
  return std::nullopt;
}

const char* kv_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "f32";
    case GgmlType::F16: return "f16";
    case GgmlType::Q8_0: return "q8";
    case GgmlType::Q4_1: return "q4";
    default: return "?";
  }
}

Status check_kv_type(GgmlType t, uint32_t head_dim) {
  if (!kv_type_supported(t))
    return Status::error("KV cache type {} is not supported (f32, f16, q8_0, q4_1)", ggml_type_info(t).name);
  if ((t == GgmlType::Q8_0 || t == GgmlType::Q4_1) && (head_dim == 0 || head_dim % kKvGroup != 0))
    return Status::error("KV cache type {} quantises groups of {} values within a head, but head_dim is {}; "
                         "use f16 or f32", kv_type_name(t), kKvGroup, head_dim);
  return {};
}

size_t kv_row_bytes(GgmlType t, uint32_t width) { return size_t(ggml_row_bytes(t, width)); }

void kv_quantize_row(GgmlType t, const float* x, void* dst, uint32_t n) {
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, x, size_t(n) * 4); return;
    case GgmlType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (uint32_t i = 0; i < n; ++i) d[i] = f32_to_f16(x[i]);
      return;
    }
    case GgmlType::Q8_0: return quantize_q8_0(x, static_cast<BlockQ8_0*>(dst), n);
    case GgmlType::Q4_1: return quantize_q4_1(x, static_cast<BlockQ4_1*>(dst), n);
    default: STRATA_CHECK(false, "kv_quantize_row: type {} is not a KV type", ggml_type_info(t).name);
  }
}

void kv_dequantize_row(GgmlType t, const void* src, float* y, uint32_t n) {
  STRATA_CHECK(kv_type_supported(t), "kv_dequantize_row: type {} is not a KV type", ggml_type_info(t).name);
  kernels::cpu::quant_kernels(t)->dequantize(src, y, n);
}

}  // namespace strata::kv
