// Quantisers to IQ4_NL and IQ4_XS (optionally with an importance matrix, iq_quant.h): each group
// of 32 values gets a scale d and per element the level of kValuesIq4nl nearest to x / d.
//
// Objective: the weighted squared error sum w (x - d * v)^2, w = 1 without an importance matrix
// and w = importance[j] with one. (Not the grid types' importance * sqrt(sigma2 + x^2): with every
// value at its nearest level only the scales can move, and the extra |x| term pulls them towards
// the large values, away from the error a matmul sees, sum_j E[a_j^2] dw_j^2. On the embedded
// model's near-uniform q/k/v/gate/up importances it raised that calibration-weighted error above
// the uniform quantiser's, and the imatrix lost at IQ4_XS; models/README has the figures.)
//
// Group scale: the exact minimiser over d (sweep_group_scale). IQ4_XS then stores it as the f16
// super-scale times a 6-bit code per group: super-scales that map the largest group scale onto
// either end of [-32, 31] (and, where that super-scale is an f16 subnormal with few significant
// bits, onto smaller codes) are tried, then the least-squares super-scale for the chosen codes;
// each group takes the floor or ceiling of its ideal code, whichever leaves less error. Every
// error is measured with the scale as stored and the levels assigned against it, so rounding a
// scale never leaves a level stale.
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

// The scale d minimising sum w (x - d * level(x / d))^2 exactly (0 for an all-zero group). As the
// inverse scale t = 1/d grows from 0, a value's nearest level changes only where x * t crosses a
// midpoint, one level at a time; between crossings the levels are fixed and the least-squares
// scale for them, sum(w x v) / sum(w v v), and its error are closed-form. Sweeping the crossings
// in order, for both signs of t (the levels are asymmetric), visits every assignment that is
// nearest for some scale, the optimum's among them: at most 8 * 32 crossings per sign, updated in
// O(1) each after a sort.
float best_group_scale(const float* x, const float* w) {
  struct Crossing {
    float t;
    int j;
  };
  constexpr int kZero = 8;  // the level nearest zero (value 1), where every value starts at t = 0+
  double best = 0;
  for (int j = 0; j < kGroup; ++j) best += (w ? w[j] : 1.0) * double(x[j]) * x[j];
  float best_d = 0;  // the all-zero reconstruction, error sum w x^2
  for (const float sign : {1.0f, -1.0f}) {
    Crossing ev[kGroup * 8];
    int ne = 0;
    int code[kGroup];
    double sxv = 0, svv = 0, sxx = 0;
    for (int j = 0; j < kGroup; ++j) {
      const float y = sign * x[j];
      const double wj = w ? w[j] : 1.0, v = kValuesIq4nl[kZero];
      code[j] = kZero;
      sxv += wj * y * v;
      svv += wj * v * v;
      sxx += wj * double(y) * y;
      // y > 0 climbs through the midpoints above the start, y < 0 descends through those below.
      if (y > 0) {
        for (int k = kZero; k < 15; ++k) ev[ne++] = {kMids.m[k] / y, j};
      } else if (y < 0) {
        for (int k = kZero - 1; k >= 0; --k) ev[ne++] = {kMids.m[k] / y, j};
      }
    }
    std::sort(ev, ev + ne, [](const Crossing& a, const Crossing& b) { return a.t < b.t; });
    for (int e = 0; e < ne; ++e) {
      const int j = ev[e].j;
      const float y = sign * x[j];
      const double wj = w ? w[j] : 1.0;
      const int to = y > 0 ? code[j] + 1 : code[j] - 1;
      const double v0 = kValuesIq4nl[code[j]], v1 = kValuesIq4nl[to];
      code[j] = to;
      sxv += wj * y * (v1 - v0);
      svv += wj * (v1 * v1 - v0 * v0);
      if (svv > 0 && sxv > 0) {  // a positive scale in this sign's direction
        const double err = sxx - sxv * sxv / svv;
        if (err < best) {
          best = err;
          best_d = sign * float(sxv / svv);
        }
      }
    }
  }
  return best_d;
}

// The 6-bit code l of a group whose best float scale is s, for super-scale d (stored scale d * l):
// the floor or the ceiling of s / d in [-32, 31], whichever leaves the smaller error (*err), with
// the group's levels for it in q.
int sub_block_code(const float* x, const float* w, float s, float d, double* err, uint8_t* q) {
  const float t = s / d;
  const int lo = std::clamp(int(std::floor(t)), -32, 31), hi = std::clamp(int(std::ceil(t)), -32, 31);
  *err = assign(x, w, d * float(lo), q);
  if (hi == lo) return lo;
  uint8_t q_hi[kGroup];
  const double e = assign(x, w, d * float(hi), q_hi);
  if (!(e < *err)) return lo;
  *err = e;
  std::memcpy(q, q_hi, kGroup);
  return hi;
}

// The IQ4 error weights: the importance alone (floored as importance_floor says). Returns w.
const float* error_weights(const float* imp, float imp_floor, int len, float* w) {
  for (int j = 0; j < len; ++j) w[j] = std::max(imp[j], imp_floor);
  return w;
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
    const float* w = imp ? error_weights(imp + i * kQK, imp_floor, kQK, wbuf) : nullptr;
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
    const float* w = imp ? error_weights(imp + i * kQK_K, imp_floor, kQK_K, wbuf) : nullptr;
    auto wg = [&](int ib) { return w ? w + kGroup * ib : nullptr; };
    float s[8];
    float sm = 0;  // the group scale of largest magnitude
    for (int ib = 0; ib < 8; ++ib) {
      s[ib] = best_group_scale(x + kGroup * ib, wg(ib));
      if (std::fabs(s[ib]) > std::fabs(sm)) sm = s[ib];
    }
    // Each candidate super-scale is judged as stored (f16), every group with its best code and
    // levels for it. Error 0 left at code 0 (all levels 1 * 0 = 0) when sm == 0.
    double best = -1;
    uint16_t best_h = 0;
    int best_l[8] = {};
    uint8_t best_q[kQK_K];
    std::fill_n(best_q, kQK_K, uint8_t(nearest_level(0.0f)));
    auto try_d = [&](float dv) {
      const uint16_t h = f32_to_f16(dv);
      const float d = f16_to_f32(h);
      if (d == 0.0f || !std::isfinite(d)) return false;
      double total = 0;
      int l[8];
      uint8_t q[kQK_K];
      for (int ib = 0; ib < 8; ++ib) {
        double e;
        l[ib] = sub_block_code(x + kGroup * ib, wg(ib), s[ib], d, &e, q + kGroup * ib);
        total += e;
      }
      if (best >= 0 && !(total < best)) return false;
      best = total;
      best_h = h;
      std::copy(l, l + 8, best_l);
      std::memcpy(best_q, q, sizeof q);
      return true;
    };
    if (sm != 0.0f) {
      // sm onto either end of the code range [-32, 31], and a little inside.
      for (const float end : {-32.0f, 31.0f}) {
        for (int k = 0; k < 5; ++k) try_d(sm / end * (1.0f + 0.02f * float(k)));
      }
      // A subnormal f16 super-scale has few significant bits: smaller codes under a larger
      // super-scale can be far more precise (a row of values ~1e-4).
      if (std::fabs(sm) / 32.0f < 0x1p-14f) {
        for (int c = 16; c >= 1; c /= 2) try_d(-sm / float(c));
      }
      // The least-squares super-scale for the chosen codes and levels, then both re-chosen.
      for (int it = 0; it < 2 && best >= 0; ++it) {
        double num = 0, den = 0;
        for (int j = 0; j < kQK_K; ++j) {
          const double v = double(best_l[j / kGroup]) * kValuesIq4nl[best_q[j]], wj = w ? w[j] : 1.0;
          num += wj * x[j] * v;
          den += wj * v * v;
        }
        if (!(den > 0) || !try_d(float(num / den))) break;
      }
    }
    BlockIQ4_XS& b = blocks[i];
    std::memset(&b, 0, sizeof b);
    b.d = best_h;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = best_l[ib] + 32;
      b.scales_l[ib / 2] = uint8_t(b.scales_l[ib / 2] | ((ls & 15) << (4 * (ib % 2))));
      b.scales_h = uint16_t(b.scales_h | ((ls >> 4) << (2 * ib)));
      pack_nibbles(best_q + kGroup * ib, b.qs + 16 * ib);
    }
  }
}

void quantize_iq4_nl(const float* src, void* dst, int64_t n) { quantize_iq4_nl_w(src, dst, n, nullptr); }
void quantize_iq4_xs(const float* src, void* dst, int64_t n) { quantize_iq4_xs_w(src, dst, n, nullptr); }

}  // namespace strata::kernels::cpu
