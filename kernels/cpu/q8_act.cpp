#include "kernels/cpu/q8_act.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"

namespace strata::kernels::cpu {
namespace {

size_t align64(size_t b) { return (b + 63) / 64 * 64; }

// std::nearbyint in the default rounding mode (half to even) for |v| < 2^22: v + 1.5 * 2^23 lies in
// [2^23, 2^24), whose spacing is 1, so the addition rounds v to an integer and the subtraction is
// exact. Inline and vectorisable, where nearbyint is a libm call per element (it was most of this
// loop's time, which runs on the caller between the thread team's jobs). -0.0 comes out as +0.0:
// the same int8 code.
inline float round_half_even(float v) {
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
}

}  // namespace

size_t q8_act_bytes(int64_t n, int64_t n_col) {
  const size_t cols = size_t(n_col), un = size_t(n);
  return align64(cols * un) + 2 * align64(cols * (un / kQ8Group) * sizeof(float)) +
         align64(cols * (un / 16) * sizeof(int16_t));
}

Q8ActView quantize_q8_act(const float* x, int64_t n, int64_t n_col, void* buf) {
  STRATA_CHECK(n % kQ8Group == 0, "int8 activations: n = {} is not a multiple of {}", n, kQ8Group);
  auto* base = static_cast<uint8_t*>(buf);
  const size_t cols = size_t(n_col), un = size_t(n);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* d = reinterpret_cast<float*>(base + align64(cols * un));
  auto* s = reinterpret_cast<int16_t*>(base + align64(cols * un) + align64(cols * (un / kQ8Group) * sizeof(float)));
  auto* sf = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(s) + align64(cols * (un / 16) * sizeof(int16_t)));
  for (int64_t c = 0; c < n_col; ++c) {
    const float* xc = x + c * n;
    int8_t* qc = q + c * n;
    for (int64_t g = 0; g < n / kQ8Group; ++g) {
      const float* xg = xc + g * kQ8Group;
      float amax = 0;
      for (int i = 0; i < kQ8Group; ++i) amax = std::max(amax, std::fabs(xg[i]));
      const float dg = amax / 127.0f;
      const float id = dg > 0 ? 1.0f / dg : 0.0f;
      int8_t qg[kQ8Group];
      // |x * id| <= 127 up to the rounding of id, so the clamp only guards that last ulp.
      for (int i = 0; i < kQ8Group; ++i) qg[i] = int8_t(std::clamp(round_half_even(xg[i] * id), -127.0f, 127.0f));
      if (g < n / 256 * 8) {
        // q8_act_pos: element 16h + 4k + i of group gi of a 256-chunk goes to vector 2k + gi / 4,
        // lane gi % 4 + 4h, byte i; four consecutive elements per lane.
        const int64_t chunk = g / 8 * 256, gi = g % 8;
        for (int h = 0; h < 2; ++h)
          for (int k = 0; k < 4; ++k)
            std::memcpy(qc + chunk + 32 * (2 * k + gi / 4) + 4 * (gi % 4 + 4 * h), qg + 16 * h + 4 * k, 4);
      } else {
        std::memcpy(qc + g * kQ8Group, qg, kQ8Group);  // past the last whole chunk: element order
      }
      d[c * (n / kQ8Group) + g] = dg;
      int group_sum = 0;
      for (int h = 0; h < 2; ++h) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += qg[16 * h + i];
        s[c * (n / 16) + 2 * g + h] = int16_t(sum);
        group_sum += sum;
      }
      sf[c * (n / kQ8Group) + g] = float(group_sum) * dg;
    }
  }
  return {q, d, s, sf, n, int(n_col)};
}

float q8_act_value(const Q8ActView& x, int col, int64_t i) {
  return float(q8_act_code(x, col, i)) * x.col_d(col)[i / kQ8Group];
}

}  // namespace strata::kernels::cpu
