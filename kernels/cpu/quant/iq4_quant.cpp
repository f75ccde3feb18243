// Quantisers to IQ4_NL and IQ4_XS (optionally with an importance matrix, iq_quant.h): each group
// of 32 values gets a scale d and per element the level of kValuesIq4nl nearest to x / d.
//
// The scale search minimises the weighted squared error sum w (x - d * v)^2 of the group (w = 1
// without an importance matrix): a set of starting scales maps the group's largest-magnitude value
// onto levels near either end of the (asymmetric) level list, and from each the assignment and the
// least-squares scale d = sum(w x v) / sum(w v v) are alternated twice. The final error is
// measured with the scale as it is stored (f16; for IQ4_XS the 6-bit sub-block scale times the f16
// super-scale), and the codes are assigned against that stored scale, so rounding the scale never
// leaves a code stale.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cpu/quant/iq_quant.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

constexpr int kGroup = 32;

// Midpoints between consecutive levels: the nearest level of t is the number of midpoints < t.
struct Mids {
  float m[15];
  constexpr Mids() : m{} {
    for (int k = 0; k < 15; ++k) m[k] = 0.5f * (float(kValuesIq4nl[k]) + float(kValuesIq4nl[k + 1]));
  }
};
constexpr Mids kMids;

inline int nearest_level(float t) { return int(std::upper_bound(kMids.m, kMids.m + 15, t) - kMids.m); }

// Codes for scale d (d == 0: the level nearest zero, so the group decodes to exact zeros) and
// the squared error they leave.
// w: the group's weights, or nullptr for 1.
double assign(const float* x, const float* w, float d, uint8_t* q) {
  double sse = 0;
  if (d == 0.0f) {
    const uint8_t zero = uint8_t(nearest_level(0.0f));
    for (int j = 0; j < kGroup; ++j) {
      q[j] = zero;
      sse += (w ? w[j] : 1.0) * double(x[j]) * x[j];
    }
    return sse;
  }
  const float id = 1.0f / d;
  for (int j = 0; j < kGroup; ++j) {
    q[j] = uint8_t(nearest_level(x[j] * id));
    const double e = double(x[j]) - double(d) * kValuesIq4nl[q[j]];
    sse += (w ? w[j] : 1.0) * e * e;
  }
  return sse;
}

// The least-squares scale for fixed codes (no level is 0, so sum(v v) > 0).
float ls_scale(const float* x, const float* w, const uint8_t* q) {
  double xv = 0, vv = 0;
  for (int j = 0; j < kGroup; ++j) {
    const double v = kValuesIq4nl[q[j]], wj = w ? w[j] : 1.0;
    xv += wj * x[j] * v;
    vv += wj * v * v;
  }
  return vv > 0 ? float(xv / vv) : 0.0f;
}

// The best float scale of one group of 32 (0 for an all-zero group).
float best_group_scale(const float* x, const float* w) {
  float xm = 0;
  for (int j = 0; j < kGroup; ++j) {
    if (std::fabs(x[j]) > std::fabs(xm)) xm = x[j];
  }
  if (xm == 0.0f) return 0.0f;
  uint8_t q[kGroup];
  float best_d = xm / float(kValuesIq4nl[0]);
  double best = assign(x, w, best_d, q);
  for (const float end : {float(kValuesIq4nl[0]), float(kValuesIq4nl[15])}) {
    for (int k = 0; k < 10; ++k) {
      float d = xm / (end * (1.0f - 0.025f * float(k)));
      for (int it = 0; it < 2; ++it) {
        assign(x, w, d, q);
        const float d2 = ls_scale(x, w, q);
        if (d2 == 0.0f) break;
        d = d2;
      }
      const double e = assign(x, w, d, q);
      if (e < best) {
        best = e;
        best_d = d;
      }
    }
  }
  return best_d;
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kGroup / 2; ++j) qs[j] = uint8_t(q[j] | (q[j + kGroup / 2] << 4));
}

}  // namespace

void importance_weights(const float* x, const float* imp, float imp_floor, int len, float* w) {
  double s2 = 0;
  for (int j = 0; j < len; ++j) s2 += double(x[j]) * x[j];
  const float sigma2 = float(s2 / len);
  for (int j = 0; j < len; ++j) w[j] = std::max(imp[j], imp_floor) * std::sqrt(sigma2 + x[j] * x[j]);
}

float importance_floor(const float* imp, int64_t n) {
  if (!imp) return 0;
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += imp[j];
  return float(1e-6 * s / double(n));  // 0: no column has any importance (callers use uniform)
}

void quantize_iq4_nl_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* blocks = static_cast<BlockIQ4_NL*>(dst);
  const float imp_floor = importance_floor(imp, n);
  if (!(imp_floor > 0)) imp = nullptr;  // an all-zero (or absent) importance: uniform
  float wbuf[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    const float* w = nullptr;
    if (imp) {
      importance_weights(x, imp + i * kQK, imp_floor, kQK, wbuf);
      w = wbuf;
    }
    uint16_t h = f32_to_f16(best_group_scale(x, w));
    if (!std::isfinite(f16_to_f32(h))) h = 0;
    uint8_t q[kGroup];
    assign(x, w, f16_to_f32(h), q);
    blocks[i].d = h;
    pack_nibbles(q, blocks[i].qs);
  }
}

void quantize_iq4_xs_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  const float imp_floor = importance_floor(imp, n);
  if (!(imp_floor > 0)) imp = nullptr;  // an all-zero (or absent) importance: uniform
  float wbuf[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    const float* w = nullptr;
    if (imp) {
      importance_weights(x, imp + i * kQK_K, imp_floor, kQK_K, wbuf);
      w = wbuf;
    }
    auto wg = [&](int ib) { return w ? w + kGroup * ib : nullptr; };
    float s[8];
    float sm = 0;  // the sub-block scale of largest magnitude
    for (int ib = 0; ib < 8; ++ib) {
      s[ib] = best_group_scale(x + kGroup * ib, wg(ib));
      if (std::fabs(s[ib]) > std::fabs(sm)) sm = s[ib];
    }
    BlockIQ4_XS& b = blocks[i];
    std::memset(&b, 0, sizeof b);
    // sm maps to the code -32 (the 6-bit range is [-32, 31]); a few super-scales around that are
    // tried, each with every sub-block's code and levels chosen for the stored scale.
    double best = -1;
    uint16_t best_h = 0;
    for (int k = 0; k < 5 && sm != 0.0f; ++k) {
      const uint16_t h = f32_to_f16(-sm / 32.0f * (1.0f + 0.02f * float(k)));
      const float d = f16_to_f32(h);
      if (d == 0.0f || !std::isfinite(d)) continue;
      double total = 0;
      for (int ib = 0; ib < 8; ++ib) {
        const int l = std::clamp(int(std::lround(s[ib] / d)), -32, 31);
        uint8_t q[kGroup];
        total += assign(x + kGroup * ib, wg(ib), d * float(l), q);
      }
      if (best < 0 || total < best) {
        best = total;
        best_h = h;
      }
    }
    const float d = f16_to_f32(best_h);
    b.d = best_h;
    for (int ib = 0; ib < 8; ++ib) {
      const int l = d == 0.0f ? 0 : std::clamp(int(std::lround(s[ib] / d)), -32, 31);
      const int ls = l + 32;
      b.scales_l[ib / 2] = uint8_t(b.scales_l[ib / 2] | ((ls & 15) << (4 * (ib % 2))));
      b.scales_h = uint16_t(b.scales_h | ((ls >> 4) << (2 * ib)));
      uint8_t q[kGroup];
      assign(x + kGroup * ib, wg(ib), d * float(l), q);
      pack_nibbles(q, b.qs + 16 * ib);
    }
  }
}

void quantize_iq4_nl(const float* src, void* dst, int64_t n) { quantize_iq4_nl_w(src, dst, n, nullptr); }
void quantize_iq4_xs(const float* src, void* dst, int64_t n) { quantize_iq4_xs_w(src, dst, n, nullptr); }

}  // namespace strata::kernels::cpu
