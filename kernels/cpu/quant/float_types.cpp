// Scalar kernels of the float types: f32 (copy), f16 and bf16 (round to nearest even, exactly as
// ggml converts). Dots accumulate in f32 over eight interleaved partial sums.
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

template <typename Decode>
float dot_lanes(const uint16_t* w, const float* x, int64_t n, Decode decode) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += decode(w[i + k]) * x[i + k];
  }
  for (; i < n; ++i) acc[0] += decode(w[i]) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

// ---- f32 ----

void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

float dot_f32_scalar(const void* row, const float* x, int64_t n) {
  const float* w = static_cast<const float*>(row);
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += w[i + k] * x[i + k];
  }
  for (; i < n; ++i) acc[0] += w[i] * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void fill_random_f32(void* dst, int64_t n, Rng& rng, float std) {
  float* y = static_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = rng.normal() * std;
}

// ---- f16 ----

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const uint16_t* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
}

float dot_f16_scalar(const void* row, const float* x, int64_t n) {
  return dot_lanes(static_cast<const uint16_t*>(row), x, n, [](uint16_t h) { return f16_to_f32(h); });
}

void fill_random_f16(void* dst, int64_t n, Rng& rng, float std) {
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(rng.normal() * std);
}

// ---- bf16 ----

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const uint16_t* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

float dot_bf16_scalar(const void* row, const float* x, int64_t n) {
  return dot_lanes(static_cast<const uint16_t*>(row), x, n, [](uint16_t h) { return bf16_to_f32(h); });
}

void fill_random_bf16(void* dst, int64_t n, Rng& rng, float std) {
  uint16_t* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(rng.normal() * std);
}

}  // namespace strata::kernels::cpu
