#include "kernels/cpu/quant/quant_search.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"

namespace strata::kernels::cpu {
namespace {

const float* unit_weights() {
  static const std::array<float, kMaxGroup> ones = [] {
    std::array<float, kMaxGroup> a;
    a.fill(1.0f);
    return a;
  }();
  return ones.data();
}

// Nearest integer of v clamped to [lo, hi] (lo >= -512), as a float; v + 512.5 > 0, so the
// truncating conversion is a floor. With bounds known only at run time the clamps compile to
// minss/maxss (no branch); a literal 0 bound compiles to a compare and branch instead, which is
// why codes in [0, hi] go through round_clamp_nonneg.
inline float round_clamp(float v, float lo, float hi) {
  v = std::min(std::max(v, lo), hi);
  return float(int(v + 512.5f)) - 512.0f;
}

// Nearest integer of v clamped to [0, hi] (0 < hi <= 512), as a float, branch-free: the float
// clamp to [-hi, hi] keeps the conversion in range, an integer max does the rest.
inline float round_clamp_nonneg(float v, float hi) {
  v = std::min(std::max(v, -hi), hi);
  const int l = int(v + 512.5f) - 512;
  return float(l < 0 ? 0 : l);
}

// The loops over a group keep 8 partial sums (a vector's worth) and add them pairwise at the end.
constexpr int kLanes = 8;
constexpr float kF16MinNormal = 0x1p-14f;
inline float lane_total(const float* a) {
  return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

// Largest finite f16 of the sign of h (an f16 rounding of a huge scale must not become inf).
inline uint16_t finite_f16(uint16_t h) {
  return (h & 0x7fffu) >= 0x7c00u ? uint16_t((h & 0x8000u) | 0x7bffu) : h;
}

// The f16 values either side of v (finite; one value when v is exactly an f16).
inline int f16_brackets(float v, uint16_t out[2]) {
  const uint16_t h = finite_f16(f32_to_f16(v));
  out[0] = h;
  const float hv = f16_to_f32(h);
  if (hv == v || !std::isfinite(v)) return 1;
  const uint16_t mag = h & 0x7fffu, sign = h & 0x8000u;
  // |v| beyond |hv|: one step up in magnitude, else one step down.
  const bool up = std::fabs(v) > std::fabs(hv);
  if (up && mag >= 0x7bffu) return 1;
  if (!up && mag == 0) return 1;
  out[1] = uint16_t(sign | (up ? mag + 1 : mag - 1));
  return 2;
}

// Candidate grid of "code the extreme value maps to", relative to the last code lim. Small
// ranges get a fine grid (where one level more or less changes the error a lot); large ranges a
// short one (the candidates differ little there, and the alternation finishes the job).
struct Grid {
  float hi, step;
  int count;
};
inline Grid candidate_grid(int lim) {
  if (lim <= 8) return {0.6f, 0.2f, 10};   // lim + 0.6 ... lim - 1.2
  if (lim <= 32) return {0.5f, 0.25f, 7};  // lim + 0.5 ... lim - 1.0
  return {0.5f, 0.5f, 4};                  // lim + 0.5 ... lim - 1.0
}

double sum_sq(const float* x, const float* w, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(w[i]) * double(x[i]) * double(x[i]);
  return s;
}

// ---- symmetric: x ≈ s * l --------------------------------------------------------------------

// sum w x l and sum w l^2 for the codes l = nearest(x * is) in [lo, hi].
void moments_scale(const float* x, const float* w, int n, float is, float lo, float hi,
                   double* sxl, double* sll) {
  float a[kLanes] = {}, b[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float l = round_clamp(x[i + k] * is, lo, hi);
      a[k] += w[i + k] * x[i + k] * l;
      b[k] += w[i + k] * l * l;
    }
  }
  for (; i < n; ++i) {
    const float l = round_clamp(x[i] * is, lo, hi);
    a[0] += w[i] * x[i] * l;
    b[0] += w[i] * l * l;
  }
  *sxl = lane_total(a);
  *sll = lane_total(b);
}

// Nearest codes for scale s (s != 0); returns sum w (x - s*l)^2 in dequantised floats.
double assign_scale(const float* x, const float* w, int n, float s, int qmin, int qmax,
                    int8_t* q) {
  const float is = 1.0f / s, lo = float(qmin), hi = float(qmax);
  float e2[kLanes] = {};
  for (int i = 0; i < n; ++i) {
    const float l = round_clamp(x[i] * is, lo, hi);
    q[i] = int8_t(l);
    const float e = x[i] - s * l;
    e2[i % kLanes] += w[i] * e * e;
  }
  return lane_total(e2);
}

// ---- affine: x ≈ s * l + o, s >= 0 -----------------------------------------------------------

struct Moments {  // weighted sums over a group for a given code assignment
  double sw = 0, sx = 0, sxx = 0, sl = 0, sll = 0, sxl = 0;
};

// Adds sum w l, sum w l^2, sum w x l for the codes l = nearest((x - o) * is) in [0, hi].
void moments_scale_min(const float* x, const float* w, int n, float o, float is, float hi,
                       Moments* m) {
  float a[kLanes] = {}, b[kLanes] = {}, c[kLanes] = {};
  for (int i = 0; i < n; ++i) {
    const float l = round_clamp_nonneg((x[i] - o) * is, hi);
    a[i % kLanes] += w[i] * l;
    b[i % kLanes] += w[i] * l * l;
    c[i % kLanes] += w[i] * x[i] * l;
  }
  m->sl = lane_total(a);
  m->sll = lane_total(b);
  m->sxl = lane_total(c);
}

struct AffineFit {
  double s = 0, o = 0, err = 0;
};

// Least-squares (s, o) for fixed codes, with o <= 0 when offset_nonpos (min >= 0), s >= 0.
AffineFit fit_affine(const Moments& m, bool offset_nonpos) {
  AffineFit f;
  const double det = m.sw * m.sll - m.sl * m.sl;
  if (det > 1e-12 * m.sw * m.sll) {
    f.s = (m.sw * m.sxl - m.sl * m.sx) / det;
    f.o = (m.sll * m.sx - m.sl * m.sxl) / det;
  } else {  // every weight on one code: the scale is free, the offset takes the mean
    f.s = 0;
    f.o = m.sx / m.sw;
  }
  if (offset_nonpos && f.o > 0) {
    f.o = 0;
    f.s = m.sll > 0 ? m.sxl / m.sll : 0;
  }
  if (f.s < 0) {
    f.s = 0;
    f.o = m.sx / m.sw;
    if (offset_nonpos && f.o > 0) f.o = 0;
  }
  f.err = m.sxx + f.s * f.s * m.sll + f.o * f.o * m.sw - 2 * f.s * m.sxl - 2 * f.o * m.sx +
          2 * f.s * f.o * m.sl;
  return f;
}

// Nearest codes for y = s * l - mn (as the decoder computes it, s and mn already the floats it
// multiplies by); returns the weighted error.
double assign_scale_min(const float* x, const float* w, int n, float s, float mn, int qmax,
                        uint8_t* q) {
  float e2[kLanes] = {};
  const float is = s > 0 ? 1.0f / s : 0.0f, hi = float(qmax);
  for (int i = 0; i < n; ++i) {
    const float l = round_clamp_nonneg((x[i] + mn) * is, hi);
    q[i] = uint8_t(l);
    const float e = x[i] - (s * l - mn);
    e2[i % kLanes] += w[i] * e * e;
  }
  return lane_total(e2);
}

// As above for the legacy form y = l * d + m (unit weights).
double assign_scale_offset(const float* x, int n, float d, float m, int qmax, uint8_t* q) {
  float e2[kLanes] = {};
  const float id = d > 0 ? 1.0f / d : 0.0f, hi = float(qmax);
  for (int i = 0; i < n; ++i) {
    const float l = round_clamp_nonneg((x[i] - m) * id, hi);
    q[i] = uint8_t(l);
    const float e = x[i] - (l * d + m);
    e2[i % kLanes] += e * e;
  }
  return lane_total(e2);
}

// The integers either side of base (floor and ceil), clamped to [lo, hi], unique.
inline int int_brackets(float base, int lo, int hi, int out[2]) {
  const float f = std::floor(base);
  const int a = f < float(lo) ? lo : (f > float(hi) ? hi : int(f));
  out[0] = a;
  if (float(a) == base || a + 1 > hi || f < float(lo)) return 1;
  out[1] = a + 1;
  return 2;
}

}  // namespace

float fit_scale(const float* x, const float* w, int n, int qmin, int qmax, int8_t* q) {
  if (!w) w = unit_weights();
  float amax = 0, xm = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      xm = x[i];
    }
  }
  const double sxx = sum_sq(x, w, n);
  if (!(amax > 0) || !std::isfinite(sxx)) {  // all zero, or a non-finite input
    std::fill_n(q, n, 0);
    return 0;
  }
  const float lo = float(qmin), hi = float(qmax);
  double best_err = sxx;
  float best_s = 0;
  for (const int sign : {1, -1}) {
    const int lim = sign * xm > 0 ? qmax : -qmin;
    const Grid g = candidate_grid(lim);
    for (int k = 0; k < g.count; ++k) {
      const float c = float(lim) + g.hi - g.step * float(k);
      if (c < 0.5f) break;
      double sxl, sll;
      moments_scale(x, w, n, float(sign) * c / amax, lo, hi, &sxl, &sll);
      if (sll <= 0) continue;
      const double err = sxx - sxl * sxl / sll;
      if (err < best_err) {
        best_err = err;
        best_s = float(sxl / sll);
      }
    }
  }
  for (int iter = 0; iter < 8 && best_s != 0; ++iter) {
    double sxl, sll;
    moments_scale(x, w, n, 1.0f / best_s, lo, hi, &sxl, &sll);
    if (sll <= 0) break;
    const double err = sxx - sxl * sxl / sll;
    if (!(err < best_err) || float(sxl / sll) == best_s) break;
    best_err = err;
    best_s = float(sxl / sll);
  }
  if (best_s == 0) {
    std::fill_n(q, n, 0);
    return 0;
  }
  assign_scale(x, w, n, best_s, qmin, qmax, q);
  return best_s;
}

ScaleMin fit_scale_min(const float* x, const float* w, int n, int qmax, bool min_nonneg,
                       uint8_t* q) {
  if (!w) w = unit_weights();
  float xmin = x[0], xmax = x[0];
  for (int i = 1; i < n; ++i) {
    xmin = std::min(xmin, x[i]);
    xmax = std::max(xmax, x[i]);
  }
  if (min_nonneg) xmin = std::min(xmin, 0.0f);
  Moments base;
  for (int i = 0; i < n; ++i) {
    base.sw += w[i];
    base.sx += double(w[i]) * x[i];
    base.sxx += double(w[i]) * double(x[i]) * x[i];
  }
  std::fill_n(q, n, 0);
  if (!std::isfinite(base.sxx)) return {0.0f, 0.0f};  // a non-finite input
  if (!(xmax > xmin)) return {0.0f, -xmin};           // constant group: y = -min
  AffineFit best;
  best.err = std::numeric_limits<double>::infinity();
  const float range = xmax - xmin, hi = float(qmax);
  const Grid g = candidate_grid(qmax);
  for (int k = 0; k < g.count; ++k) {
    const float c = float(qmax) + g.hi - g.step * float(k);
    if (c < 0.5f) break;
    Moments m = base;
    moments_scale_min(x, w, n, xmin, c / range, hi, &m);
    const AffineFit f = fit_affine(m, min_nonneg);
    if (f.err < best.err) best = f;
  }
  for (int iter = 0; iter < 8 && best.s > 0; ++iter) {
    Moments m = base;
    const float s = float(best.s), o = float(best.o);
    moments_scale_min(x, w, n, o, 1.0f / s, hi, &m);
    const AffineFit f = fit_affine(m, min_nonneg);
    if (!(f.err < best.err) || (float(f.s) == s && float(f.o) == o)) break;
    best = f;
  }
  const float s = float(best.s), mn = float(-best.o);
  assign_scale_min(x, w, n, s, mn, qmax, q);
  return {s, mn};
}

uint16_t quantize_block_scale_f16(const float* x, int n, int qmin, int qmax, int8_t* q) {
  const float s = fit_scale(x, nullptr, n, qmin, qmax, q);
  if (s == 0) return 0;
  const float* w = unit_weights();
  uint16_t cand[2];
  const int nc = f16_brackets(s, cand);
  int8_t tmp[kMaxGroup];
  double best_err = sum_sq(x, w, n);
  uint16_t best = 0;
  std::fill_n(q, n, 0);
  for (int c = 0; c < nc; ++c) {
    const float d = f16_to_f32(cand[c]);
    if (d == 0) continue;
    const double err = assign_scale(x, w, n, d, qmin, qmax, tmp);
    if (err < best_err) {
      best_err = err;
      best = cand[c];
      std::memcpy(q, tmp, size_t(n));
    }
  }
  return best;
}

void quantize_block_scale_min_f16(const float* x, int n, int qmax, uint16_t* d, uint16_t* m,
                                  uint8_t* q) {
  const ScaleMin sm = fit_scale_min(x, nullptr, n, qmax, false, q);
  uint16_t dc[2] = {0, 0}, mc[2];
  const int nd = sm.scale > 0 ? f16_brackets(sm.scale, dc) : 1;
  const int nm = f16_brackets(-sm.min, mc);
  uint8_t tmp[kMaxGroup];
  double best_err = std::numeric_limits<double>::infinity();
  for (int i = 0; i < nd; ++i) {
    for (int j = 0; j < nm; ++j) {
      const double err =
          assign_scale_offset(x, n, f16_to_f32(dc[i]), f16_to_f32(mc[j]), qmax, tmp);
      if (err < best_err) {
        best_err = err;
        *d = dc[i];
        *m = mc[j];
        std::memcpy(q, tmp, size_t(n));
      }
    }
  }
}

// ---- K super-blocks ----------------------------------------------------------------------------

namespace {

// Per sub-block best integer scale for super-scale dv, and the total error.
double eval_super_scale(const float* x, const SymSuperSpec& sp, const float* sub_s, float dv,
                        int* ls, int8_t* q) {
  const float* w = unit_weights();
  double total = 0;
  int8_t tmp[kMaxGroup];
  for (int j = 0; j < sp.n_sub; ++j) {
    const float* xj = x + j * sp.sub_len;
    int cand[2];
    const int nc = dv != 0 ? int_brackets(sub_s[j] / dv, sp.ls_min, sp.ls_max, cand) : 0;
    double best = sum_sq(xj, w, sp.sub_len);
    ls[j] = 0;
    std::memset(q + j * sp.sub_len, 0, size_t(sp.sub_len));
    for (int c = 0; c < nc; ++c) {
      const float s = dv * float(cand[c]);  // what the decoder multiplies by
      if (s == 0) continue;
      const double err = assign_scale(xj, w, sp.sub_len, s, sp.qmin, sp.qmax, tmp);
      if (err < best) {
        best = err;
        ls[j] = cand[c];
        std::memcpy(q + j * sp.sub_len, tmp, size_t(sp.sub_len));
      }
    }
    total += best;
  }
  return total;
}

// Per sub-block best (integer scale, integer min) for super-scales (dv, dmv); total error.
double eval_super_scale_min(const float* x, const AffineSuperSpec& sp, const ScaleMin* sub,
                            float dv, float dmv, int* ls, int* lm, uint8_t* q) {
  const float* w = unit_weights();
  double total = 0;
  uint8_t tmp[kMaxGroup];
  for (int j = 0; j < sp.n_sub; ++j) {
    const float* xj = x + j * sp.sub_len;
    int sc[2] = {0, 0}, mc[2] = {0, 0};
    int ns = 1, nm = 1;
    if (dv > 0) ns = int_brackets(sub[j].scale / dv, 0, sp.ls_max, sc);
    if (dmv > 0) nm = int_brackets(sub[j].min / dmv, 0, sp.lm_max, mc);
    double best = std::numeric_limits<double>::infinity();
    for (int a = 0; a < ns; ++a) {
      for (int b = 0; b < nm; ++b) {
        const float s = dv * float(sc[a]), mn = dmv * float(mc[b]);
        const double err = assign_scale_min(xj, w, sp.sub_len, s, mn, sp.qmax, tmp);
        if (err < best) {
          best = err;
          ls[j] = sc[a];
          lm[j] = mc[b];
          std::memcpy(q + j * sp.sub_len, tmp, size_t(sp.sub_len));
        }
      }
    }
    total += best;
  }
  return total;
}

}  // namespace

uint16_t quantize_super_scale(const float* x, const SymSuperSpec& sp, int* ls, int8_t* q) {
  float sub_s[kMaxGroup];
  float s_ext = 0;
  for (int j = 0; j < sp.n_sub; ++j) {
    sub_s[j] = fit_scale(x + j * sp.sub_len, nullptr, sp.sub_len, sp.qmin, sp.qmax,
                         q + j * sp.sub_len);
    if (std::fabs(sub_s[j]) > std::fabs(s_ext)) s_ext = sub_s[j];
  }
  const int n = sp.n_sub * sp.sub_len;
  if (s_ext == 0) {
    std::fill(ls, ls + sp.n_sub, 0);
    std::fill_n(q, n, 0);
    return 0;
  }
  int cur_ls[kMaxGroup];
  int8_t cur_q[kMaxGroup];
  double best_err = std::numeric_limits<double>::infinity();
  uint16_t best = 0;
  auto try_d = [&](float d) {
    const uint16_t h = finite_f16(f32_to_f16(d));
    const double err = eval_super_scale(x, sp, sub_s, f16_to_f32(h), cur_ls, cur_q);
    if (err < best_err) {
      best_err = err;
      best = h;
      std::copy(cur_ls, cur_ls + sp.n_sub, ls);
      std::memcpy(q, cur_q, size_t(n));
    }
  };
  // The extreme sub-block scale onto either end of the scale range, and one step inside.
  for (const float t : {float(sp.ls_max), float(sp.ls_min), float(sp.ls_max) - 1.0f,
                        float(sp.ls_min) + 1.0f}) {
    try_d(s_ext / t);
  }
  // A super-scale in f16's subnormal range has few significant bits; smaller integer scales
  // with a larger super-scale can then be far more precise (a constant 1e-3 row in Q6_K).
  if (std::fabs(s_ext) / float(sp.ls_max) < kF16MinNormal) {
    for (int t = sp.ls_max / 2; t >= 1; t /= 2) try_d(s_ext / float(t));
  }
  // Least-squares super-scale for the chosen integer scales and codes, then re-choose them.
  for (int iter = 0; iter < 2; ++iter) {
    double num = 0, den = 0;
    for (int j = 0; j < sp.n_sub; ++j) {
      double sxq = 0, sqq = 0;
      for (int i = 0; i < sp.sub_len; ++i) {
        const int k = j * sp.sub_len + i;
        sxq += double(x[k]) * q[k];
        sqq += double(q[k]) * q[k];
      }
      num += ls[j] * sxq;
      den += double(ls[j]) * ls[j] * sqq;
    }
    if (den <= 0) break;
    const uint16_t before = best;
    try_d(float(num / den));
    if (best == before) break;
  }
  return best;
}

void quantize_super_scale_min(const float* x, const AffineSuperSpec& sp, uint16_t* d,
                              uint16_t* dmin, int* ls, int* lm, uint8_t* q) {
  ScaleMin sub[kMaxGroup];
  float s_max = 0, m_max = 0;
  for (int j = 0; j < sp.n_sub; ++j) {
    sub[j] = fit_scale_min(x + j * sp.sub_len, nullptr, sp.sub_len, sp.qmax, true,
                           q + j * sp.sub_len);
    s_max = std::max(s_max, sub[j].scale);
    m_max = std::max(m_max, sub[j].min);
  }
  const int n = sp.n_sub * sp.sub_len;
  *d = *dmin = 0;
  std::fill(ls, ls + sp.n_sub, 0);
  std::fill(lm, lm + sp.n_sub, 0);
  if (s_max == 0 && m_max == 0) {
    std::fill_n(q, n, 0);
    return;
  }
  int cur_ls[kMaxGroup], cur_lm[kMaxGroup];
  uint8_t cur_q[kMaxGroup];
  double best_err = std::numeric_limits<double>::infinity();
  auto try_d = [&](float dv, float dmv) {
    const uint16_t hd = finite_f16(f32_to_f16(std::max(dv, 0.0f)));
    const uint16_t hm = finite_f16(f32_to_f16(std::max(dmv, 0.0f)));
    const double err = eval_super_scale_min(x, sp, sub, f16_to_f32(hd), f16_to_f32(hm), cur_ls,
                                            cur_lm, cur_q);
    if (err < best_err) {
      best_err = err;
      *d = hd;
      *dmin = hm;
      std::copy(cur_ls, cur_ls + sp.n_sub, ls);
      std::copy(cur_lm, cur_lm + sp.n_sub, lm);
      std::memcpy(q, cur_q, size_t(n));
      return true;
    }
    return false;
  };
  try_d(s_max / float(sp.ls_max), m_max / float(sp.lm_max));
  // As in quantize_super_scale: subnormal super-scales are imprecise, try smaller integer ones.
  if (s_max / float(sp.ls_max) < kF16MinNormal || m_max / float(sp.lm_max) < kF16MinNormal) {
    for (int k = 1; (sp.ls_max >> k) >= 1 && (sp.lm_max >> k) >= 1; ++k) {
      try_d(s_max / float(sp.ls_max >> k), m_max / float(sp.lm_max >> k));
    }
  }
  // Least squares for (d, dmin) given the integer scales, mins and codes:
  // y = d * A - dmin * B with A = ls * q, B = lm.
  for (int iter = 0; iter < 3; ++iter) {
    double saa = 0, sbb = 0, sab = 0, sxa = 0, sxb = 0;
    for (int j = 0; j < sp.n_sub; ++j) {
      for (int i = 0; i < sp.sub_len; ++i) {
        const int k = j * sp.sub_len + i;
        const double a = double(ls[j]) * q[k], b = lm[j];
        saa += a * a;
        sbb += b * b;
        sab += a * b;
        sxa += x[k] * a;
        sxb += x[k] * b;
      }
    }
    double dv = 0, dmv = 0;
    const double det = saa * sbb - sab * sab;
    if (sbb > 0 && det > 1e-12 * saa * sbb) {
      dv = (sxa * sbb - sab * sxb) / det;
      dmv = (sab * sxa - saa * sxb) / det;
    }
    if (!(sbb > 0 && det > 1e-12 * saa * sbb) || dmv < 0) {
      dmv = 0;
      dv = saa > 0 ? sxa / saa : 0;
      if (sbb > 0 && saa == 0) dmv = -sxb / sbb;
    }
    if (!try_d(float(dv), float(dmv))) break;
  }
}

}  // namespace strata::kernels::cpu
