// Byte layouts of the GGML quantised blocks (format facts; little-endian, packed, no padding).
// y = dequantised value. Scales are IEEE f16 stored as raw uint16_t bits (core/half.h converts).
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

inline constexpr int kQK = 32;     // elements per block of the "legacy" types
inline constexpr int kQK_K = 256;  // elements per super-block of the K types
inline constexpr int kKScaleBytes = 12;

// y[j] = (q - 8) * d; q = low nibble of qs[j] for j < 16, high nibble of qs[j-16] for j >= 16.
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };
// y = q * d + m (q: 4 bits, same nibble order as Q4_0).
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[kQK / 2]; };
// y = (q - 16) * d; q = nibble | (bit j of qh << 4), qh as a little-endian u32.
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
// y = q * d + m with the 5-bit q of Q5_0.
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
// y = q * d.
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };

// 16 sub-blocks of 16; scales[i]: low nibble = scale, high nibble = min;
// y = d * scale * q - dmin * min, q 2 bits.
struct BlockQ2_K { uint8_t scales[kQK_K / 16]; uint8_t qs[kQK_K / 4]; uint16_t d; uint16_t dmin; };
// 16 sub-blocks of 16; 6-bit signed scales (biased by 32) packed in 12 bytes; q = 2 low bits
// from qs, 3rd bit from hmask (bit set -> no offset, bit clear -> -4); y = d * (scale - 32) * q.
struct BlockQ3_K { uint8_t hmask[kQK_K / 8]; uint8_t qs[kQK_K / 4]; uint8_t scales[kKScaleBytes]; uint16_t d; };
// 8 sub-blocks of 32; 6-bit scales and mins packed in 12 bytes; y = d * scale * q - dmin * min.
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleBytes]; uint8_t qs[kQK_K / 2]; };
// As Q4_K with a 5th bit per element in qh.
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleBytes]; uint8_t qh[kQK_K / 8]; uint8_t qs[kQK_K / 2]; };
// 16 sub-blocks of 16; q = 4 low bits (ql) | 2 high bits (qh), minus 32; y = d * scale * q.
struct BlockQ6_K { uint8_t ql[kQK_K / 2]; uint8_t qh[kQK_K / 4]; int8_t scales[kQK_K / 16]; uint16_t d; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

}  // namespace strata::kernels::cpu
