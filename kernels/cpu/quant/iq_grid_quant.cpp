// Quantisers of the grid i-quants (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M), written
// for strata. Every type is "f16 super-scale d per 256, a small integer sub-scale s per 32 (or 16)
// elements giving the sub-scale d * mul * (s + 1/2), per group of 8 (4) elements a grid entry, and
// signs per 8 elements" (IQ1: no signs, a shift +-1/8 per 32 or 8 elements instead), so one search
// serves all of them, described by a TypeSpec; only the bit packing differs per type.
//
// The search, per super-block, minimising sum w (x - y)^2 (weights: iq_quant.h):
//   1. signs from the data; where the format stores 7 sign bits per 8 (the 8th makes the count of
//      negatives even) and the count is odd, the element where a wrong sign costs least (smallest
//      w |x|) is flipped, i.e. its target magnitude becomes -|x|;
//   2. per sub-block, 9 float sub-scales (0.6x to 1.3x) around "the largest magnitude maps onto the top
//      level": for each, every group's best entry (iq_grid_search.h), then the least-squares
//      sub-scale for those entries and its error in closed form; the best candidate is refined by
//      alternating entries / least-squares scale;
//   3. the super-scale: candidates around "the largest sub-scale maps onto the top code", each
//      sub-block's integer code chosen by the error its entries give at the *stored* scale; the
//      best d (as f16) wins;
//   4. with the stored scales, every group's entry (and IQ1's shift) is searched again and kept
//      where it lowers the error, so rounding the scales never leaves an entry stale.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grid_search.h"
#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cpu/quant/iq_quant.h"

namespace strata::kernels::cpu {
namespace {

enum class Signs { parity7, full8, none };

struct TypeSpec {
  GridKind grid;
  Signs signs;
  int scale_len;  // elements per integer sub-scale: 32 or 16
  int smax;       // largest sub-scale code: 15 or 7
  float mul;      // sub-scale = d * mul * (s + 0.5)
  int delta_len;  // IQ1: elements per +-1/8 shift (32 or 8); 0: no shift
};

constexpr TypeSpec kIq2xxs{GridKind::iq2xxs, Signs::parity7, 32, 15, 0.25f, 0};
constexpr TypeSpec kIq2xs{GridKind::iq2xs, Signs::parity7, 16, 15, 0.25f, 0};
constexpr TypeSpec kIq2s{GridKind::iq2s, Signs::full8, 16, 15, 0.25f, 0};
constexpr TypeSpec kIq3xxs{GridKind::iq3xxs, Signs::parity7, 32, 15, 0.5f, 0};
constexpr TypeSpec kIq3s{GridKind::iq3s, Signs::full8, 32, 15, 2.0f, 0};
constexpr TypeSpec kIq1s{GridKind::iq1s, Signs::none, 32, 7, 2.0f, 32};
constexpr TypeSpec kIq1m{GridKind::iq1s, Signs::none, 16, 7, 2.0f, 8};

constexpr int kMaxGroups = kQK_K / 4;  // 64 groups of 4 (IQ3)
constexpr int kMaxSub = kQK_K / 16;

// One super-block's codes, in format-neutral form (the packers turn it into bits).
struct SuperCodes {
  uint16_t d = 0;            // f16 bits
  int s[kMaxSub] = {};       // sub-scale codes
  int entry[kMaxGroups] = {};
  uint8_t sign[kQK_K / 8] = {};  // bit j set: element j of the 8 is negative
  bool delta_neg[kQK_K / 8] = {};  // per shift block (element / delta_len; IQ1): the shift is -1/8
};

struct SubFit {
  float scale = 0;          // least-squares sub-scale
  int entry[kMaxGroups];    // per group of this sub-block
  bool delta_neg[4] = {};   // per group (IQ1_M) or [0] for the sub-block (IQ1_S)
  double sav = 0, svv = 0, saa = 0;  // sums of w a v, w v v, w a a for the fit's entries
};

inline float delta_of(bool neg) { return neg ? -kIq1Delta : kIq1Delta; }

// Fits entries of sub-block (a, w: scale_len values) at scale sc; fills f (entries, shifts, sums).
void fit_at_scale(const TypeSpec& t, const GridIndex& g, const float* a, const float* w, float sc, SubFit& f) {
  const int ng = t.scale_len / g.group;
  f.sav = f.svv = f.saa = 0;
  auto accumulate = [&](int k, float delta) {  // float within a group, double across groups
    const float* v = g.values.data() + size_t(f.entry[k]) * g.group;
    const float* ak = a + k * g.group;
    const float* wk = w + k * g.group;
    float sav = 0, svv = 0, saa = 0;
    for (int j = 0; j < g.group; ++j) {
      const float vv = v[j] + delta;
      sav += wk[j] * ak[j] * vv;
      svv += wk[j] * vv * vv;
      saa += wk[j] * ak[j] * ak[j];
    }
    f.sav += sav;
    f.svv += svv;
    f.saa += saa;
  };
  if (t.delta_len == 0) {
    for (int k = 0; k < ng; ++k) {
      float e;
      f.entry[k] = best_entry(g, a + k * g.group, w + k * g.group, sc, 0.0f, &e);
      accumulate(k, 0.0f);
    }
  } else if (t.delta_len == t.scale_len) {  // one shift for the sub-block: try both
    int ent[2][4];
    float tot[2] = {0, 0};
    for (int s = 0; s < 2; ++s) {
      for (int k = 0; k < ng; ++k) {
        float e;
        ent[s][k] = best_entry(g, a + k * g.group, w + k * g.group, sc, delta_of(s), &e);
        tot[s] += e;
      }
    }
    const int s = tot[1] < tot[0] ? 1 : 0;
    f.delta_neg[0] = s;
    for (int k = 0; k < ng; ++k) {
      f.entry[k] = ent[s][k];
      accumulate(k, delta_of(s));
    }
  } else {  // a shift per group
    for (int k = 0; k < ng; ++k) {
      float e0, e1;
      const int i0 = best_entry(g, a + k * g.group, w + k * g.group, sc, delta_of(false), &e0);
      const int i1 = best_entry(g, a + k * g.group, w + k * g.group, sc, delta_of(true), &e1);
      f.delta_neg[k] = e1 < e0;
      f.entry[k] = e1 < e0 ? i1 : i0;
      accumulate(k, delta_of(f.delta_neg[k]));
    }
  }
}

// Error of fit f at sub-scale sc (closed form in the fit's sums).
inline double err_at(const SubFit& f, double sc) { return f.saa - 2 * sc * f.sav + sc * sc * f.svv; }

SubFit fit_sub_block(const TypeSpec& t, const GridIndex& g, const float* a, const float* w) {
  SubFit best;
  float amax = 0;
  for (int j = 0; j < t.scale_len; ++j) amax = std::max(amax, std::fabs(a[j]));
  if (amax == 0.0f) {  // the entry of least magnitude (the sub-block decodes as near zero as it can)
    fit_at_scale(t, g, a, w, 1.0f, best);
    best.scale = 0;
    return best;
  }
  const float vmax = g.max_level() + (t.delta_len ? kIq1Delta : 0.0f);
  double best_err = -1;
  SubFit f;
  constexpr int kTries = 9;  // 15 gave the same error on the testdata (to 0.3%), 1.4x slower
  for (int k = 0; k < kTries; ++k) {
    const float sc = amax / (vmax * (0.6f + (0.7f / float(kTries - 1)) * float(k)));
    fit_at_scale(t, g, a, w, sc, f);
    if (f.svv <= 0 || f.sav <= 0) continue;
    f.scale = float(f.sav / f.svv);
    const double e = err_at(f, f.scale);
    if (best_err < 0 || e < best_err) {
      best_err = e;
      best = f;
    }
  }
  if (best_err < 0) {  // every candidate anti-correlated (cannot happen with data signs); fall back
    fit_at_scale(t, g, a, w, amax / vmax, best);
    best.scale = amax / vmax;
    return best;
  }
  for (int it = 0; it < 3; ++it) {
    fit_at_scale(t, g, a, w, best.scale, f);
    if (f.svv <= 0 || f.sav <= 0) break;
    f.scale = float(f.sav / f.svv);
    const double e = err_at(f, f.scale);
    if (e >= best_err) break;
    best_err = e;
    best = f;
  }
  return best;
}

// The best code for sub-block fit f at super-scale d, and its error.
int best_code(const TypeSpec& t, const SubFit& f, float d, double* err) {
  const double unit = double(d) * t.mul;
  const double ideal = f.scale / unit - 0.5;
  int best = 0;
  double best_e = -1;
  for (const int c : {int(std::floor(ideal)), int(std::floor(ideal)) + 1}) {
    const int s = std::clamp(c, 0, t.smax);
    const double e = err_at(f, unit * (s + 0.5));
    if (best_e < 0 || e < best_e) {
      best_e = e;
      best = s;
    }
  }
  *err = best_e;
  return best;
}

void quantize_super(const TypeSpec& t, const float* x, const float* w, SuperCodes& out) {
  const GridIndex& g = grid_index(t.grid);
  float a[kQK_K];
  // 1. signs
  for (int b = 0; b < kQK_K / 8; ++b) {
    const float* xb = x + 8 * b;
    float* ab = a + 8 * b;
    if (t.signs == Signs::none) {
      std::memcpy(ab, xb, 8 * sizeof(float));
      continue;
    }
    unsigned s = 0;
    for (int j = 0; j < 8; ++j) {
      if (xb[j] < 0) s |= 1u << j;
      ab[j] = std::fabs(xb[j]);
    }
    if (t.signs == Signs::parity7 && (__builtin_popcount(s) & 1)) {
      int jmin = 0;
      for (int j = 1; j < 8; ++j)
        if (w[8 * b + j] * ab[j] < w[8 * b + jmin] * ab[jmin]) jmin = j;
      s ^= 1u << jmin;
      ab[jmin] = -ab[jmin];
    }
    out.sign[b] = uint8_t(s);
  }
  // 2. sub-blocks
  const int n_sub = kQK_K / t.scale_len;
  const int ng = t.scale_len / g.group;
  SubFit fits[kMaxSub];
  float smax_f = 0;
  for (int k = 0; k < n_sub; ++k) {
    fits[k] = fit_sub_block(t, g, a + k * t.scale_len, w + k * t.scale_len);
    smax_f = std::max(smax_f, fits[k].scale);
  }
  // 3. super-scale
  out.d = 0;
  if (smax_f > 0) {
    const float d0 = smax_f / (t.mul * (float(t.smax) + 0.5f));
    double best = -1;
    for (const float fct : {1.0f, 0.97f, 0.94f, 0.91f, 0.88f, 0.85f, 1.03f}) {
      const uint16_t h = f32_to_f16(d0 * fct);
      const float d = f16_to_f32(h);
      if (!(d > 0) || !std::isfinite(d)) continue;
      double tot = 0;
      for (int k = 0; k < n_sub; ++k) {
        double e;
        best_code(t, fits[k], d, &e);
        tot += e;
      }
      if (best < 0 || tot < best) {
        best = tot;
        out.d = h;
      }
    }
  }
  const float d = f16_to_f32(out.d);
  // 4. entries again at the stored scales
  for (int k = 0; k < n_sub; ++k) {
    const SubFit& f = fits[k];
    double e_unused;
    out.s[k] = d > 0 ? best_code(t, f, d, &e_unused) : 0;
    const float sc = d > 0 ? d * t.mul * (float(out.s[k]) + 0.5f) : 0.0f;
    const float* ak = a + k * t.scale_len;
    const float* wk = w + k * t.scale_len;
    int* ent = out.entry + k * ng;
    for (int q = 0; q < ng; ++q) ent[q] = f.entry[q];
    const int d_per_sub = t.delta_len ? std::max(1, t.scale_len / t.delta_len) : 0;
    for (int q = 0; q < d_per_sub; ++q) out.delta_neg[(k * t.scale_len) / t.delta_len + q] = f.delta_neg[q];
    if (sc <= 0) continue;
    if (t.delta_len == t.scale_len) {  // IQ1_S: compare the kept entries with a refit under each shift
      float tot_old = 0;
      for (int q = 0; q < ng; ++q)
        tot_old += entry_error(g, ent[q], ak + q * g.group, wk + q * g.group, sc, delta_of(f.delta_neg[0]));
      for (int s = 0; s < 2; ++s) {
        int cand[4];
        float tot = 0;
        for (int q = 0; q < ng; ++q) {
          float e;
          cand[q] = best_entry(g, ak + q * g.group, wk + q * g.group, sc, delta_of(s), &e);
          tot += e;
        }
        if (tot < tot_old) {
          tot_old = tot;
          for (int q = 0; q < ng; ++q) ent[q] = cand[q];
          out.delta_neg[(k * t.scale_len) / t.delta_len] = s;
        }
      }
      continue;
    }
    for (int q = 0; q < ng; ++q) {  // one group at a time (IQ1_M: its own shift)
      const float* aq = ak + q * g.group;
      const float* wq = wk + q * g.group;
      bool* dn = t.delta_len ? &out.delta_neg[(k * t.scale_len + q * g.group) / t.delta_len] : nullptr;
      float best = entry_error(g, ent[q], aq, wq, sc, dn ? delta_of(*dn) : 0.0f);
      for (int s = 0; s < (dn ? 2 : 1); ++s) {
        float e;
        const int c = best_entry(g, aq, wq, sc, dn ? delta_of(s) : 0.0f, &e);
        if (e < best) {
          best = e;
          ent[q] = c;
          if (dn) *dn = s;
        }
      }
    }
  }
}

// ---- weights and the row loop ----

// The importance weights of a super-block (iq_quant.h), or 1 without an importance.
void make_weights(const float* x, const float* imp, float imp_floor, float* w) {
  if (!imp) {
    std::fill(w, w + kQK_K, 1.0f);
    return;
  }
  importance_weights(x, imp, imp_floor, kQK_K, w);
}

template <typename Pack>
void quantize_rows(const TypeSpec& t, const float* src, int64_t n, const float* imp, Pack pack) {
  const float floor_w = importance_floor(imp, n);
  if (!(floor_w > 0)) imp = nullptr;  // an all-zero (or absent) importance: uniform
  float w[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    make_weights(x, imp ? imp + i * kQK_K : nullptr, floor_w, w);
    SuperCodes c;
    quantize_super(t, x, w, c);
    pack(i, c);
  }
}

// The stored 7-bit sign index of a sign byte with an even count of negatives (ksigns maps the
// index back, bit 7 being the parity).
inline unsigned sign7(uint8_t s) { return s & 127u; }

}  // namespace

void quantize_iq2_xxs_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* out = static_cast<BlockIQ2_XXS*>(dst);
  quantize_rows(kIq2xxs, src, n, imp, [&](int64_t i, const SuperCodes& c) {
    BlockIQ2_XXS& b = out[i];
    b.d = c.d;
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t idx = 0, meta = uint32_t(c.s[ib]) << 28;
      for (int l = 0; l < 4; ++l) {
        idx |= uint32_t(c.entry[4 * ib + l]) << (8 * l);
        meta |= sign7(c.sign[4 * ib + l]) << (7 * l);
      }
      std::memcpy(b.qs + 4 * ib, &idx, 4);
      std::memcpy(b.qs + 4 * ib + 2, &meta, 4);
    }
  });
}

void quantize_iq2_xs_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* out = static_cast<BlockIQ2_XS*>(dst);
  quantize_rows(kIq2xs, src, n, imp, [&](int64_t i, const SuperCodes& c) {
    BlockIQ2_XS& b = out[i];
    b.d = c.d;
    for (int k = 0; k < 32; ++k) b.qs[k] = uint16_t(c.entry[k] | (sign7(c.sign[k]) << 9));
    for (int ib = 0; ib < 8; ++ib) b.scales[ib] = uint8_t(c.s[2 * ib] | (c.s[2 * ib + 1] << 4));
  });
}

void quantize_iq2_s_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* out = static_cast<BlockIQ2_S*>(dst);
  quantize_rows(kIq2s, src, n, imp, [&](int64_t i, const SuperCodes& c) {
    BlockIQ2_S& b = out[i];
    std::memset(&b, 0, sizeof b);
    b.d = c.d;
    for (int k = 0; k < 32; ++k) {
      b.qs[k] = uint8_t(c.entry[k] & 255);
      b.qh[k / 4] = uint8_t(b.qh[k / 4] | ((c.entry[k] >> 8) << (2 * (k % 4))));
      b.qs[32 + k] = c.sign[k];
    }
    for (int ib = 0; ib < 8; ++ib) b.scales[ib] = uint8_t(c.s[2 * ib] | (c.s[2 * ib + 1] << 4));
  });
}

void quantize_iq3_xxs_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* out = static_cast<BlockIQ3_XXS*>(dst);
  quantize_rows(kIq3xxs, src, n, imp, [&](int64_t i, const SuperCodes& c) {
    BlockIQ3_XXS& b = out[i];
    b.d = c.d;
    for (int k = 0; k < 64; ++k) b.qs[k] = uint8_t(c.entry[k]);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t meta = uint32_t(c.s[ib]) << 28;
      for (int l = 0; l < 4; ++l) meta |= sign7(c.sign[4 * ib + l]) << (7 * l);
      std::memcpy(b.qs + 64 + 4 * ib, &meta, 4);
    }
  });
}

void quantize_iq3_s_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* out = static_cast<BlockIQ3_S*>(dst);
  quantize_rows(kIq3s, src, n, imp, [&](int64_t i, const SuperCodes& c) {
    BlockIQ3_S& b = out[i];
    std::memset(&b, 0, sizeof b);
    b.d = c.d;
    for (int k = 0; k < 64; ++k) {
      b.qs[k] = uint8_t(c.entry[k] & 255);
      b.qh[k / 8] = uint8_t(b.qh[k / 8] | ((c.entry[k] >> 8) << (k % 8)));
    }
    for (int k = 0; k < 32; ++k) b.signs[k] = c.sign[k];
    for (int ib = 0; ib < 8; ++ib) b.scales[ib / 2] = uint8_t(b.scales[ib / 2] | (c.s[ib] << (4 * (ib % 2))));
  });
}

void quantize_iq1_s_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* out = static_cast<BlockIQ1_S*>(dst);
  quantize_rows(kIq1s, src, n, imp, [&](int64_t i, const SuperCodes& c) {
    BlockIQ1_S& b = out[i];
    b.d = c.d;
    for (int ib = 0; ib < 8; ++ib) {
      unsigned h = unsigned(c.s[ib]) << 12 | (c.delta_neg[ib] ? 0x8000u : 0u);
      for (int l = 0; l < 4; ++l) {
        const int e = c.entry[4 * ib + l];
        b.qs[4 * ib + l] = uint8_t(e & 255);
        h |= unsigned(e >> 8) << (3 * l);
      }
      b.qh[ib] = uint16_t(h);
    }
  });
}

void quantize_iq1_m_w(const float* src, void* dst, int64_t n, const float* imp) {
  auto* out = static_cast<BlockIQ1_M*>(dst);
  quantize_rows(kIq1m, src, n, imp, [&](int64_t i, const SuperCodes& c) {
    BlockIQ1_M& b = out[i];
    std::memset(&b, 0, sizeof b);
    uint16_t sc[4] = {};
    for (int k = 0; k < 32; ++k) {
      const int e = c.entry[k];
      b.qs[k] = uint8_t(e & 255);
      const unsigned nib = unsigned(e >> 8) | (c.delta_neg[k] ? 8u : 0u);
      b.qh[k / 2] = uint8_t(b.qh[k / 2] | (nib << (4 * (k % 2))));
    }
    for (int k = 0; k < 16; ++k) sc[k / 4] = uint16_t(sc[k / 4] | (c.s[k] << (3 * (k % 4))));
    for (int k = 0; k < 4; ++k) sc[k] = uint16_t(sc[k] | (((c.d >> (4 * k)) & 15u) << 12));
    std::memcpy(b.scales, sc, sizeof sc);
  });
}

}  // namespace strata::kernels::cpu

namespace strata::kernels::cpu {

// The unweighted entry points of the QuantKernels rows (quant_table.cpp).
void quantize_iq2_xxs(const float* src, void* dst, int64_t n) { quantize_iq2_xxs_w(src, dst, n, nullptr); }
void quantize_iq2_xs(const float* src, void* dst, int64_t n) { quantize_iq2_xs_w(src, dst, n, nullptr); }
void quantize_iq2_s(const float* src, void* dst, int64_t n) { quantize_iq2_s_w(src, dst, n, nullptr); }
void quantize_iq3_xxs(const float* src, void* dst, int64_t n) { quantize_iq3_xxs_w(src, dst, n, nullptr); }
void quantize_iq3_s(const float* src, void* dst, int64_t n) { quantize_iq3_s_w(src, dst, n, nullptr); }
void quantize_iq1_s(const float* src, void* dst, int64_t n) { quantize_iq1_s_w(src, dst, n, nullptr); }
void quantize_iq1_m(const float* src, void* dst, int64_t n) { quantize_iq1_m_w(src, dst, n, nullptr); }

QuantizeWeightedFn quantize_weighted(GgmlType type) {
  switch (type) {
    case GgmlType::IQ2_XXS: return quantize_iq2_xxs_w;
    case GgmlType::IQ2_XS: return quantize_iq2_xs_w;
    case GgmlType::IQ2_S: return quantize_iq2_s_w;
    case GgmlType::IQ3_XXS: return quantize_iq3_xxs_w;
    case GgmlType::IQ3_S: return quantize_iq3_s_w;
    case GgmlType::IQ1_S: return quantize_iq1_s_w;
    case GgmlType::IQ1_M: return quantize_iq1_m_w;
    case GgmlType::IQ4_NL: return quantize_iq4_nl_w;
    case GgmlType::IQ4_XS: return quantize_iq4_xs_w;
    default: return nullptr;
  }
}

bool wants_importance(GgmlType type) {
  return type == GgmlType::IQ2_XXS || type == GgmlType::IQ2_XS || type == GgmlType::IQ1_S;
}

}  // namespace strata::kernels::cpu
