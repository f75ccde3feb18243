// What q8_act.cpp's portable loop and q8_act_avx2.cpp share: the rounding constant, where a group's
// codes go in the lane order (q8_act.h), and the per-column group loops. Internal to those files.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/q8_act.h"

namespace strata::kernels::cpu {

// 1.5 * 2^23: for |v| < 2^22, (v + kQ8RoundMagic) - kQ8RoundMagic is v rounded half to even.
inline constexpr float kQ8RoundMagic = 12582912.0f;

// Places group g's 32 codes (element order) into column qc of n elements, where q8_act_pos puts
// them: 4-byte pieces in the lane order of its chunk, or element order past the chunks.
inline void store_q8_group(int8_t* qc, int64_t n, int64_t g, const int8_t* qg) {
  const int64_t chunk = g / 8 * 256, gi = g % 8;
  const int quads = q8_act_quads(n, chunk);
  if (quads == 0) {
    std::memcpy(qc + g * kQ8Group, qg, kQ8Group);
    return;
  }
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      std::memcpy(qc + chunk + 32 * (quads * k + gi / 4) + 4 * (gi % 4 + 4 * h), qg + 16 * h + 4 * k, 4);
}

// Groups [g0, g1) of one column of n elements: codes into qc (lane order), d[g], s[2g], s[2g + 1],
// sf[g] (arrays of the whole column; nothing outside those groups is touched, so disjoint ranges
// may run concurrently). The AVX2 body computes the same bits as the portable one.
void quantize_q8_groups_portable(const float* xc, int64_t n, int64_t g0, int64_t g1, int8_t* qc, float* d, int16_t* s,
                                 float* sf);
void quantize_q8_groups_avx2(const float* xc, int64_t n, int64_t g0, int64_t g1, int8_t* qc, float* d, int16_t* s,
                             float* sf);

}  // namespace strata::kernels::cpu
