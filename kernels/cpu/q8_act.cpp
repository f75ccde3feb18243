#include "kernels/cpu/q8_act.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/status.h"
#include "kernels/cpu/q8_act_impl.h"

namespace strata::kernels::cpu {
namespace {

size_t align64(size_t b) { return (b + 63) / 64 * 64; }

// std::nearbyint in the default rounding mode (half to even) for |v| < 2^22: v + 1.5 * 2^23 lies in
// [2^23, 2^24), whose spacing is 1, so the addition rounds v to an integer and the subtraction is
// exact. Inline and vectorisable, where nearbyint is a libm call per element (it was most of this
// loop's time, which runs on the caller between the thread team's jobs). -0.0 comes out as +0.0:
// the same int8 code.
inline float round_half_even(float v) { return (v + kQ8RoundMagic) - kQ8RoundMagic; }

using GroupsFn = void (*)(const float*, int64_t, int64_t, int64_t, int8_t*, float*, int16_t*, float*);

GroupsFn best_groups() {
  static const GroupsFn groups = cpu_features().avx2 ? quantize_q8_groups_avx2 : quantize_q8_groups_portable;
  return groups;
}

// Groups [g0, g1) of column c of x into the layout of buf (q8_act_layout).
void quantize_column(GroupsFn groups, const float* x, const Q8ActView& v, int64_t c, int64_t g0, int64_t g1) {
  const int64_t n = v.n;
  groups(x + c * n, n, g0, g1, const_cast<int8_t*>(v.col_q(int(c))), const_cast<float*>(v.col_d(int(c))),
         const_cast<int16_t*>(v.col_s(int(c))), const_cast<float*>(v.col_sf(int(c))));
}

Q8ActView quantize_with(GroupsFn groups, const float* x, int64_t n, int64_t n_col, void* buf) {
  const Q8ActView v = q8_act_layout(n, n_col, buf);
  for (int64_t c = 0; c < n_col; ++c) quantize_column(groups, x, v, c, 0, n / kQ8Group);
  return v;
}

}  // namespace

void quantize_q8_groups_portable(const float* xc, int64_t n, int64_t g0, int64_t g1, int8_t* qc, float* d, int16_t* s,
                                 float* sf) {
  for (int64_t g = g0; g < g1; ++g) {
    const float* xg = xc + g * kQ8Group;
    float amax = 0;
    for (int i = 0; i < kQ8Group; ++i) amax = std::max(amax, std::fabs(xg[i]));
    const float dg = amax / 127.0f;
    const float id = dg > 0 ? 1.0f / dg : 0.0f;
    int8_t qg[kQ8Group];
    // |x * id| <= 127 up to the rounding of id, so the clamp only guards that last ulp.
    for (int i = 0; i < kQ8Group; ++i) qg[i] = int8_t(std::clamp(round_half_even(xg[i] * id), -127.0f, 127.0f));
    store_q8_group(qc, n, g, qg);
    d[g] = dg;
    int group_sum = 0;
    for (int h = 0; h < 2; ++h) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += qg[16 * h + i];
      s[2 * g + h] = int16_t(sum);
      group_sum += sum;
    }
    sf[g] = float(group_sum) * dg;
  }
}

size_t q8_act_bytes(int64_t n, int64_t n_col) {
  const size_t cols = size_t(n_col), un = size_t(n);
  return align64(cols * un) + 2 * align64(cols * (un / kQ8Group) * sizeof(float)) +
         align64(cols * (un / 16) * sizeof(int16_t));
}

Q8ActView q8_act_layout(int64_t n, int64_t n_col, void* buf) {
  STRATA_CHECK(n % kQ8Group == 0, "int8 activations: n = {} is not a multiple of {}", n, kQ8Group);
  auto* base = static_cast<uint8_t*>(buf);
  const size_t cols = size_t(n_col), un = size_t(n);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* d = reinterpret_cast<float*>(base + align64(cols * un));
  auto* s = reinterpret_cast<int16_t*>(base + align64(cols * un) + align64(cols * (un / kQ8Group) * sizeof(float)));
  auto* sf = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(s) + align64(cols * (un / 16) * sizeof(int16_t)));
  return {q, d, s, sf, n, int(n_col)};
}

Q8ActView quantize_q8_act(const float* x, int64_t n, int64_t n_col, void* buf) {
  return quantize_with(best_groups(), x, n, n_col, buf);
}

void quantize_q8_act_range(const float* x, const Q8ActView& out, int c, int64_t i0, int64_t i1) {
  STRATA_CHECK(i0 % kQ8Group == 0 && i1 % kQ8Group == 0 && 0 <= i0 && i0 <= i1 && i1 <= out.n && 0 <= c && c < out.n_col,
               "int8 activations: elements [{}, {}) of column {} in columns of {}", i0, i1, c, out.n);
  quantize_column(best_groups(), x, out, c, i0 / kQ8Group, i1 / kQ8Group);
}

Q8ActView quantize_q8_act_portable(const float* x, int64_t n, int64_t n_col, void* buf) {
  return quantize_with(quantize_q8_groups_portable, x, n, n_col, buf);
}

float q8_act_value(const Q8ActView& x, int col, int64_t i) {
  return float(q8_act_code(x, col, i)) * x.col_d(col)[i / kQ8Group];
}

}  // namespace strata::kernels::cpu
