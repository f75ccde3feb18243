// IEEE binary16 and bfloat16 conversions, portable and bit-exact (no F16C needed), so the scalar
// reference and file formats agree with every SIMD path.
#pragma once

#include <bit>
#include <cstdint>

namespace strata {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {  // inf / nan
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {  // normal
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {  // zero
    bits = sign;
  } else {  // subnormal: value = mant * 2^-24, exact in f32
    float f = float(mant) * 0x1p-24f;
    return (sign ? -f : f);
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest, ties to even; overflow -> inf; NaN stays NaN (quiet).
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520 -> inf
  if (ax < 0x38800000u) {                          // below 2^-14: subnormal or zero
    // value / 2^-24 rounded to nearest even, done in float: exact because the scaling is a power
    // of two and the rounding happens once in the integer conversion below.
    const float scaled = std::bit_cast<float>(ax) * 0x1p24f;  // < 1024
    uint32_t i = uint32_t(scaled);
    const float rem = scaled - float(i);
    if (rem > 0.5f || (rem == 0.5f && (i & 1u))) ++i;
    return sign | uint16_t(i);
  }
  // normal: rebias exponent, round mantissa from 23 to 10 bits (carry into exponent is correct)
  uint32_t r = ax - 0x38000000u;  // exponent - 112
  const uint32_t lsb = (r >> 13) & 1u;
  r += 0xfffu + lsb;
  return sign | uint16_t(r >> 13);
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// Round to nearest even; NaN stays NaN (quiet bit forced so truncation cannot make it inf).
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

}  // namespace strata
