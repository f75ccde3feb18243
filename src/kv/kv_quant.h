// KV element types and their row codecs: what KvCache::write stores and what tests decode.
//
// Quantised KV uses ggml's block layouts (kernels/cpu/quant/blocks.h) so that the attention
// kernels read it with the existing block decoders and dots; only the quantiser is KV-specific.
// It is the simple one-pass "range onto the codes" quantiser (no scale search: it runs on every
// token written, and the CUDA kv_write, kernels/cuda/kv_quant.cuh, reproduces it bit for bit):
//   Q8_0: d = f16 rounded *up* of max|x| / 127, q = round(x / d) in [-127, 127], y = q * d.
//   Q4_1: m = f16 rounded *down* of min x, d = f16 rounded up of (max x - m) / 15,
//         q = round((x - m) / d) in [0, 15], y = q * d + m.
// Rounding d up (and m down) keeps every value inside the code range, so the error bound is the
// rounding step's: |y - x| <= d / 2 for both types, d the stored scale of the value's group of 32
// (up to f32 rounding of the arithmetic: the tests allow 2^-16 * (d + |x|) more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/ggml_type.h"
#include "core/status.h"

namespace strata::kv {

inline constexpr uint32_t kKvGroup = 32;  // values per quantisation group (one ggml block)

// F32, F16, Q8_0, Q4_1.
bool kv_type_supported(GgmlType t);
// Names accepted by the CLI: f32, f16, q8 (q8_0), q4 (q4_1); nullopt for anything else.
std::optional<GgmlType> kv_type_from_name(std::string_view name);
// "f32", "f16", "q8", "q4".
const char* kv_type_name(GgmlType t);
// Errors: the type is not a KV type, or is quantised and head_dim is not a multiple of 32.
Status check_kv_type(GgmlType t, uint32_t head_dim);

// Bytes of one stored row of `width` values (width a multiple of 32 for quantised types).
size_t kv_row_bytes(GgmlType t, uint32_t width);
// x (n floats) -> one stored row; n a multiple of 32 for quantised types.
void kv_quantize_row(GgmlType t, const float* x, void* dst, uint32_t n);
// One stored row -> n floats (the exact decode the attention kernels use).
void kv_dequantize_row(GgmlType t, const void* src, float* y, uint32_t n);

// f16 neighbours used by the quantiser (exposed for the tests): the smallest f16 >= x, the largest
// f16 <= x; finite x; results saturate at +-65504.
uint16_t f16_round_up(float x);
uint16_t f16_round_down(float x);

}  // namespace strata::kv
