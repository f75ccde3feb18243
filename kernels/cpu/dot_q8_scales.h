// The K types' packed sub-block scales unpacked into the per-16 integer form dot_q8.h describes.
// Internal to the dot_q8_*.cpp files. Everything here has internal linkage (anonymous namespace),
// so files compiled with different ISA flags can include it without sharing one instantiation.
#pragma once

#include <cstdint>

#include "kernels/cpu/quant/blocks.h"

namespace strata::kernels::cpu {
namespace {

// Q4_K / Q5_K: one min per group, applied through the activations' group sums sf (dot_q8.h).
template <typename Block> inline constexpr bool kGroupMin = false;
template <> inline constexpr bool kGroupMin<BlockQ4_K> = true;
template <> inline constexpr bool kGroupMin<BlockQ5_K> = true;

// Per half-group h of 16 elements: sc_h, sc_h * offset, m_h (see dot_q8.h).
struct KScales16 {
  alignas(32) int16_t sc[16];
  alignas(32) int16_t off_sc[16];
  alignas(32) int16_t m[16];
};

// Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits in 12 bytes (layout in kernels/cpu/quant/k_types.cpp);
// pair j covers group j, so both halves of the group get it. No offset.
inline void unpack_scales_k4(const uint8_t* q, KScales16* s) {
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k4_scale_min(j, q, &sc, &m);
    s->sc[2 * j] = s->sc[2 * j + 1] = int16_t(sc);
    s->m[2 * j] = s->m[2 * j + 1] = int16_t(m);
    s->off_sc[2 * j] = s->off_sc[2 * j + 1] = 0;
  }
}

// Q3_K: 16 6-bit codes (scale + 32); unsigned weight codes carry offset 4.
inline void unpack_scales_q3k(const uint8_t* q, KScales16* s) {
  for (int i = 0; i < 16; ++i) {
    const int sc = q3_scale_code(i, q) - 32;
    s->sc[i] = int16_t(sc);
    s->off_sc[i] = int16_t(4 * sc);
    s->m[i] = 0;
  }
}

// Q6_K: 16 int8 scales; unsigned weight codes carry offset 32.
inline void unpack_scales_q6k(const int8_t* q, KScales16* s) {
  for (int i = 0; i < 16; ++i) {
    s->sc[i] = q[i];
    s->off_sc[i] = int16_t(32 * q[i]);
    s->m[i] = 0;
  }
}

}  // namespace
}  // namespace strata::kernels::cpu
