// What q8_act.cpp's portable loop and q8_act_avx2.cpp share: the rounding constant, where a group's
// codes go in the lane order (q8_act.h), and the per-column group loops. Internal to those files.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/q8_act.h"

namespace strata::kernels::cpu {

// 1.5 * 2^23: for |v| < 2^22, (v + kQ8RoundMagic) - kQ8RoundMagic is v rounded half to even.
inline constexpr float kQ8RoundMagic = 12582912.0f;

// Places group g's 32 codes (element order) into column qc of n elements: the lane order inside
// whole 256-element chunks (element 16h + 4k + i of group gi of a chunk goes to vector 2k + gi / 4,
// lane gi % 4 + 4h, byte i) and a last half chunk (vector k, the same lane), element order past the
// last whole chunk otherwise.
inline void store_q8_group(int8_t* qc, int64_t n, int64_t g, const int8_t* qg) {
  const int64_t whole = n / 256 * 8;  // groups in whole chunks
  if (g < whole || n % 256 == 128) {
    const int64_t chunk = g / 8 * 256, gi = g % 8;
    const int64_t vectors = g < whole ? 2 : 1;  // vector 2k + gi / 4 of a chunk, vector k of the half chunk
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        std::memcpy(qc + chunk + 32 * (vectors * k + gi / 4) + 4 * (gi % 4 + 4 * h), qg + 16 * h + 4 * k, 4);
  } else {
    std::memcpy(qc + g * kQ8Group, qg, kQ8Group);
  }
}

// Groups [g0, g1) of one column of n elements: codes into qc (lane order), d[g], s[2g], s[2g + 1],
// sf[g] (arrays of the whole column; nothing outside those groups is touched, so disjoint ranges
// may run concurrently). The AVX2 body computes the same bits as the portable one.
void quantize_q8_groups_portable(const float* xc, int64_t n, int64_t g0, int64_t g1, int8_t* qc, float* d, int16_t* s,
                                 float* sf);
void quantize_q8_groups_avx2(const float* xc, int64_t n, int64_t g0, int64_t g1, int8_t* qc, float* d, int16_t* s,
                             float* sf);

}  // namespace strata::kernels::cpu
