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

// ---- i-quants (256-element super-blocks except IQ4_NL; grids and signs in iq_grids.h) ----
// Grid types: groups of 8 (IQ2, IQ1) or 4 (IQ3) elements are one grid entry (magnitudes), signs
// come from 8 sign bits per 8 elements (bit j set = element j negative), scales per 32 (or 16).

// Per 32 elements two u32 (qs[4*ib .. 4*ib+3] as u16 pairs): the first is 4 grid indices (bytes),
// the second 4 x 7-bit ksigns indices (bits 0-27) and a 4-bit scale s (bits 28-31);
// y = d * (0.5 + s) * 0.25 * grid * sign.
struct BlockIQ2_XXS { uint16_t d; uint16_t qs[kQK_K / 8]; };
// qs[i]: 9-bit grid index | 7-bit ksigns index << 9; scales[ib]: two 4-bit s (low: first 16).
struct BlockIQ2_XS { uint16_t d; uint16_t qs[kQK_K / 8]; uint8_t scales[kQK_K / 32]; };
// qs[0..31]: grid index low 8 bits (2 more per index in qh[ib], 2 bits each), qs[32..63]: sign
// bytes; scales as IQ2_XS.
struct BlockIQ2_S { uint16_t d; uint8_t qs[kQK_K / 4]; uint8_t qh[kQK_K / 32]; uint8_t scales[kQK_K / 32]; };
// qs[0..63]: grid indices (4 elements each); qs[64..95]: per 32 elements a u32 of 4 x 7-bit ksigns
// indices and a 4-bit scale s (bits 28-31); y = d * (0.5 + s) * 0.5 * grid * sign.
struct BlockIQ3_XXS { uint16_t d; uint8_t qs[3 * kQK_K / 8]; };
// 9-bit grid indices: qs low 8 bits, qh one bit each; signs: one bit per element; scales: a 4-bit
// s per 32 elements; y = d * (1 + 2 * s) * grid * sign.
struct BlockIQ3_S { uint16_t d; uint8_t qs[kQK_K / 4]; uint8_t qh[kQK_K / 32]; uint8_t signs[kQK_K / 8]; uint8_t scales[kQK_K / 64]; };
// 11-bit grid indices: qs low 8 bits, qh[ib] bits 3l..3l+2 the high 3; qh[ib] bits 12-14 a 3-bit
// scale s, bit 15 the delta sign; y = d * (2 * s + 1) * (grid + delta).
struct BlockIQ1_S { uint16_t d; uint8_t qs[kQK_K / 8]; uint16_t qh[kQK_K / 32]; };
// As IQ1_S with a scale per 16 and a delta sign per 8 elements; qh[k]: high 3 index bits and the
// delta sign bit (bit 3) per nibble; scales: four u16, each four 3-bit scales in bits 0-11, their
// top nibbles together the f16 super-scale d (scale 0 holds bits 0-3 of d, scale 3 bits 12-15).
struct BlockIQ1_M { uint8_t qs[kQK_K / 8]; uint8_t qh[kQK_K / 16]; uint8_t scales[kQK_K / 32]; };
// y = d * kValuesIq4nl[q]; nibble order as Q4_0.
struct BlockIQ4_NL { uint16_t d; uint8_t qs[kQK / 2]; };
// 8 sub-blocks of 32; 6-bit scale ls = 4 low bits (scales_l, nibble per sub-block) | 2 high bits
// (scales_h, 2 per sub-block); y = d * (ls - 32) * kValuesIq4nl[q]; nibbles as IQ4_NL per 32.
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[kQK_K / 64]; uint8_t qs[kQK_K / 2]; };

static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);

// ---- packed scales of the K types and IQ1_M ----
// Internal linkage on purpose: the ISA-specific kernel files (dot_*avx*.cpp, dot_q8_*.cpp) include
// this header, and an inline function with external linkage compiled there could be the copy the
// linker keeps for every caller.
namespace {

// Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits in 12 bytes. Pairs 0-3 sit in the low 6 bits of
// bytes 0-3 (scales) and 4-7 (mins); pairs 4-7 keep their low nibbles in bytes 8-11 (scale low,
// min high) and their top 2 bits in the top bits of bytes 0-3 (scale) and 4-7 (min).
inline void k4_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q3_K: 16 6-bit codes (scale + 32). Low nibbles: codes 0-7 in the low halves of bytes 0-7,
// codes 8-15 in the high halves; top 2 bits of code i in byte 8 + i % 4 at bit 2 * (i / 4).
inline int q3_scale_code(int i, const uint8_t* s) {
  const int lo = i < 8 ? (s[i] & 15) : (s[i - 8] >> 4);
  const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return lo | (hi << 4);
}

// IQ1_M's f16 super-scale: the top nibbles of the four u16 scale words, word k giving bits 4k..4k+3.
inline uint16_t iq1m_d_bits(const uint16_t* sc) {
  return uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

}  // namespace

}  // namespace strata::kernels::cpu
