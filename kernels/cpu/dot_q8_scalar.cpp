// Scalar reference of the int8-activation dots (the arithmetic of dot_q8.h, lane for lane), and
// the dispatch table. The decoders here read the GGML block layouts (kernels/cpu/quant/blocks.h)
// straight into unsigned codes in element order; the SIMD kernels decode the same bits their own
// way and must agree exactly.
#include <cpuid.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/dot_q8_scales.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"

namespace strata::kernels::cpu {
namespace {

// One K super-block in the integer form: u[256] codes in element order (unsigned, IQ4_XS's signed
// levels), scales, d, dmin.
struct KDecoded {
  int16_t u[kQK_K];
  KScales16 s;
  float d, dmin;
};

void decode_k(const BlockQ4_K& b, KDecoded* o) {
  o->d = f16_to_f32(b.d), o->dmin = f16_to_f32(b.dmin);
  unpack_scales_k4(b.scales, &o->s);
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) {
      o->u[64 * j + l] = b.qs[32 * j + l] & 15;
      o->u[64 * j + 32 + l] = b.qs[32 * j + l] >> 4;
    }
}

void decode_k(const BlockQ5_K& b, KDecoded* o) {
  o->d = f16_to_f32(b.d), o->dmin = f16_to_f32(b.dmin);
  unpack_scales_k4(b.scales, &o->s);
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) {
      o->u[64 * j + l] = uint8_t((b.qs[32 * j + l] & 15) | (((b.qh[l] >> (2 * j)) & 1) << 4));
      o->u[64 * j + 32 + l] = uint8_t((b.qs[32 * j + l] >> 4) | (((b.qh[l] >> (2 * j + 1)) & 1) << 4));
    }
}

// Element 128c + 32k + l: 4 low bits from ql[64c + 32(k&1) + l] (high nibble for k >= 2), 2 high
// bits from qh[32c + l] at bit 2k.
void decode_k(const BlockQ6_K& b, KDecoded* o) {
  o->d = f16_to_f32(b.d), o->dmin = 0;
  unpack_scales_q6k(b.scales, &o->s);
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lq = b.ql[64 * c + 32 * (k & 1) + l];
        const int lo = k >= 2 ? lq >> 4 : lq & 15;
        const int hi = (b.qh[32 * c + l] >> (2 * k)) & 3;
        o->u[128 * c + 32 * k + l] = uint8_t(lo | (hi << 4));
      }
}

// Element 128h + 32j + p: 2 low bits from qs[32h + p] at bit 2j; hmask[p] bit 4h + j set means no
// -4 offset, so u = low + 4 * bit and the value is u - 4.
void decode_k(const BlockQ3_K& b, KDecoded* o) {
  o->d = f16_to_f32(b.d), o->dmin = 0;
  unpack_scales_q3k(b.scales, &o->s);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int p = 0; p < 32; ++p) {
        const int lo = (b.qs[32 * h + p] >> (2 * j)) & 3;
        const int hb = (b.hmask[p] >> (4 * h + j)) & 1;
        o->u[128 * h + 32 * j + p] = uint8_t(lo | (hb << 2));
      }
}

// Element 128h + 32j + p: 2 bits from qs[32h + p] at bit 2j (the plane order of Q3_K); half-group
// i: scale = low nibble of scales[i], min = high nibble.
void decode_k(const BlockQ2_K& b, KDecoded* o) {
  o->d = f16_to_f32(b.d), o->dmin = f16_to_f32(b.dmin);
  for (int i = 0; i < 16; ++i) {
    o->s.sc[i] = int16_t(b.scales[i] & 15);
    o->s.m[i] = int16_t(b.scales[i] >> 4);
    o->s.off_sc[i] = 0;
  }
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int p = 0; p < 32; ++p) o->u[128 * h + 32 * j + p] = int16_t((b.qs[32 * h + p] >> (2 * j)) & 3);
}

// Group g of 32: scale ls - 32 (ls: nibble g of scales_l, 2 bits of scales_h at 2g), levels of
// kValuesIq4nl in IQ4_NL's nibble order.
void decode_k(const BlockIQ4_XS& b, KDecoded* o) {
  o->d = f16_to_f32(b.d), o->dmin = 0;
  for (int g = 0; g < 8; ++g) {
    const int ls = ((b.scales_l[g / 2] >> (4 * (g % 2))) & 15) | (((b.scales_h >> (2 * g)) & 3) << 4);
    for (int h = 2 * g; h < 2 * g + 2; ++h) {
      o->s.sc[h] = int16_t(ls - 32);
      o->s.off_sc[h] = o->s.m[h] = 0;
    }
    for (int l = 0; l < 16; ++l) {
      o->u[32 * g + l] = kValuesIq4nl[b.qs[16 * g + l] & 15];
      o->u[32 * g + 16 + l] = kValuesIq4nl[b.qs[16 * g + l] >> 4];
    }
  }
}

// IQ3_XXS group g of 32: 8 grid indices qs[8g..8g+7] (4 elements each, in order), then at qs[64 +
// 4g] a u32: four 7-bit ksigns indices (one per 8 elements) and s in bits 28-31. The value is
// d * (0.5 + s) * 0.5 * grid * sign = (d / 4) * (2s + 1) * grid * sign: sc = 2s + 1 and d / 4
// (exact in f32) as the super-block scale.
void decode_k(const BlockIQ3_XXS& b, KDecoded* o) {
  o->d = 0.25f * f16_to_f32(b.d), o->dmin = 0;
  for (int g = 0; g < 8; ++g) {
    uint32_t meta;
    std::memcpy(&meta, b.qs + kQK_K / 4 + 4 * g, sizeof meta);
    for (int h = 2 * g; h < 2 * g + 2; ++h) {
      o->s.sc[h] = int16_t(2 * (meta >> 28) + 1);
      o->s.off_sc[h] = o->s.m[h] = 0;
    }
    for (int i = 0; i < 32; ++i) {
      const uint32_t grid = kIq3xxsGrid.v[b.qs[8 * g + i / 4]];
      const unsigned signs = kKsignsIq2xs.v[(meta >> (7 * (i / 8))) & 127];
      const int mag = int((grid >> (8 * (i % 4))) & 255);
      o->u[32 * g + i] = int16_t((signs >> (i % 8)) & 1 ? -mag : mag);
    }
  }
}

// IQ3_S group g of 32: 9-bit grid indices qs[8g + k] | bit k of qh[g] << 8 (4 elements each),
// sign bits signs[4g..4g+3] (bit j of byte l: element 8l + j), s = nibble g of scales; the value
// is d * (1 + 2s) * grid * sign.
void decode_k(const BlockIQ3_S& b, KDecoded* o) {
  o->d = f16_to_f32(b.d), o->dmin = 0;
  for (int g = 0; g < 8; ++g) {
    const int s = (b.scales[g / 2] >> (4 * (g % 2))) & 15;
    for (int h = 2 * g; h < 2 * g + 2; ++h) {
      o->s.sc[h] = int16_t(2 * s + 1);
      o->s.off_sc[h] = o->s.m[h] = 0;
    }
    for (int i = 0; i < 32; ++i) {
      const int k = i / 4;
      const uint32_t grid = kIq3sGrid.v[b.qs[8 * g + k] | (((b.qh[g] >> k) & 1u) << 8)];
      const int mag = int((grid >> (8 * (i % 4))) & 255);
      o->u[32 * g + i] = int16_t((b.signs[4 * g + i / 8] >> (i % 8)) & 1 ? -mag : mag);
    }
  }
}

// The grid types with 8-element entries keep d / 8 as the super-block scale: IQ2_* because
// d * (0.5 + s) * 0.25 = (d / 8) * (2s + 1), IQ1_* because d * (2s + 1) * (g + delta) with delta =
// +-1/8 is (d / 8) * (2s + 1) * (8g +- 1). d / 8 of an f16 is exact in f32.
// One scale per half-group h from s per half (IQ2_XS, IQ2_S, IQ1_M) or per group.
void odd_scales(KDecoded* o, int h, int s) {
  o->s.sc[h] = int16_t(2 * s + 1);
  o->s.off_sc[h] = o->s.m[h] = 0;
}
// Element i (0..7) of an unsigned 2-bit-grid entry with its 8 sign bits.
int16_t signed_mag(uint64_t grid, unsigned signs, int i) {
  const int mag = int((grid >> (8 * i)) & 255);
  return int16_t((signs >> i) & 1 ? -mag : mag);
}

// IQ2_XXS group g: qs bytes 8g..8g+3 the grid indices of its four entries of 8, then a u32 as
// IQ3_XXS's: four 7-bit ksigns indices and s in bits 28-31.
void decode_k(const BlockIQ2_XXS& b, KDecoded* o) {
  o->d = 0.125f * f16_to_f32(b.d), o->dmin = 0;
  const uint8_t* q = reinterpret_cast<const uint8_t*>(b.qs);
  for (int g = 0; g < 8; ++g) {
    uint32_t meta;
    std::memcpy(&meta, q + 8 * g + 4, sizeof meta);
    odd_scales(o, 2 * g, int(meta >> 28)), odd_scales(o, 2 * g + 1, int(meta >> 28));
    for (int i = 0; i < 32; ++i) {
      const unsigned signs = kKsignsIq2xs.v[(meta >> (7 * (i / 8))) & 127];
      o->u[32 * g + i] = signed_mag(kIq2xxsGrid.v[q[8 * g + i / 8]], signs, i % 8);
    }
  }
}

// IQ2_XS group g: qs[4g + e] = 9-bit grid index | 7-bit ksigns index << 9 for entry e; s of the
// first half in the low nibble of scales[g], of the second in the high one.
void decode_k(const BlockIQ2_XS& b, KDecoded* o) {
  o->d = 0.125f * f16_to_f32(b.d), o->dmin = 0;
  for (int g = 0; g < 8; ++g) {
    odd_scales(o, 2 * g, b.scales[g] & 15), odd_scales(o, 2 * g + 1, b.scales[g] >> 4);
    for (int i = 0; i < 32; ++i) {
      const unsigned q = b.qs[4 * g + i / 8];
      o->u[32 * g + i] = signed_mag(kIq2xsGrid.v[q & 511], kKsignsIq2xs.v[q >> 9], i % 8);
    }
  }
}

// IQ2_S group g: 10-bit grid index qs[4g + e] | bits 2e of qh[g] << 8, sign byte qs[32 + 4g + e];
// scales as IQ2_XS.
void decode_k(const BlockIQ2_S& b, KDecoded* o) {
  o->d = 0.125f * f16_to_f32(b.d), o->dmin = 0;
  for (int g = 0; g < 8; ++g) {
    odd_scales(o, 2 * g, b.scales[g] & 15), odd_scales(o, 2 * g + 1, b.scales[g] >> 4);
    for (int i = 0; i < 32; ++i) {
      const int e = i / 8;
      const unsigned idx = b.qs[4 * g + e] | (((b.qh[g] >> (2 * e)) & 3u) << 8);
      o->u[32 * g + i] = signed_mag(kIq2sGrid.v[idx], b.qs[kQK_K / 8 + 4 * g + e], i % 8);
    }
  }
}

// IQ1_S group g: 11-bit grid index qs[4g + e] | bits 3e of qh[g] << 8, s in bits 12-14 of qh[g],
// the delta's sign in bit 15; w = 8 * grid + delta (grid in {-1, 0, 1}, delta +-1).
void decode_k(const BlockIQ1_S& b, KDecoded* o) {
  o->d = 0.125f * f16_to_f32(b.d), o->dmin = 0;
  for (int g = 0; g < 8; ++g) {
    const unsigned h = b.qh[g];
    odd_scales(o, 2 * g, int((h >> 12) & 7)), odd_scales(o, 2 * g + 1, int((h >> 12) & 7));
    const int delta = h & 0x8000 ? -1 : 1;
    for (int i = 0; i < 32; ++i) {
      const int e = i / 8;
      const uint64_t grid = kIq1sGrid.v[b.qs[4 * g + e] | (((h >> (3 * e)) & 7u) << 8)];
      o->u[32 * g + i] = int16_t(8 * int8_t(uint8_t(grid >> (8 * (i % 8)))) + delta);
    }
  }
}

// IQ1_M group g: entry e's nibble of qh[2g + e / 2] (low for even e) holds the top 3 index bits
// and the delta's sign (bit 3); s of half j of group g in bits 6 (g % 2) + 3j of the scale word
// g / 2. w as IQ1_S.
void decode_k(const BlockIQ1_M& b, KDecoded* o) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  o->d = 0.125f * f16_to_f32(iq1m_d_bits(sc)), o->dmin = 0;
  for (int g = 0; g < 8; ++g) {
    const unsigned s = sc[g / 2] >> (6 * (g % 2));
    odd_scales(o, 2 * g, int(s & 7)), odd_scales(o, 2 * g + 1, int((s >> 3) & 7));
    for (int i = 0; i < 32; ++i) {
      const int e = i / 8;
      const unsigned h = b.qh[2 * g + e / 2] >> (4 * (e % 2));
      const uint64_t grid = kIq1sGrid.v[b.qs[4 * g + e] | ((h & 7u) << 8)];
      o->u[32 * g + i] = int16_t(8 * int8_t(uint8_t(grid >> (8 * (i % 8)))) + (h & 8 ? -1 : 1));
    }
  }
}

float hsum8(const float* v) {
  const float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
  const float b0 = a0 + a2, b1 = a1 + a3;
  return b0 + b1;
}

template <typename Block>
void dot_k_scalar(const void* row, const Q8ActView& x, float* y, int64_t y_stride) {
  const Block* blocks = static_cast<const Block*>(row);
  float acc[kQ8MaxCols][8] = {}, accm[kQ8MaxCols][8] = {};
  KDecoded kd;
  for (int64_t b = 0; b < x.n / kQK_K; ++b) {
    decode_k(blocks[b], &kd);
    for (int c = 0; c < x.n_col; ++c) {
      int8_t xq[kQK_K];  // the super-block's codes in element order
      for (int i = 0; i < kQK_K; ++i) xq[i] = q8_act_code(x, c, b * kQK_K + i);
      const float* dx = x.col_d(c) + b * 8;
      const int16_t* sx = x.col_s(c) + b * 16;
      for (int g = 0; g < 8; ++g) {
        int32_t isum = 0, mint = 0;
        for (int h = 2 * g; h < 2 * g + 2; ++h) {
          int32_t dot = 0;
          for (int i = 16 * h; i < 16 * h + 16; ++i) dot += int32_t(kd.u[i]) * xq[i];
          isum += int32_t(kd.s.sc[h]) * dot - int32_t(kd.s.off_sc[h]) * sx[h];
          mint += int32_t(kd.s.m[h]) * sx[h];
        }
        const float t = float(isum) * dx[g];
        acc[c][g] = std::fma(t, kd.d, acc[c][g]);
        if constexpr (kGroupMin<Block>) {
          const float md = float(kd.s.m[2 * g]) * kd.dmin;
          accm[c][g] = std::fma(md, x.col_sf(c)[b * 8 + g], accm[c][g]);
        } else {
          accm[c][g] = std::fma(float(mint) * dx[g], kd.dmin, accm[c][g]);
        }
      }
    }
  }
  for (int c = 0; c < x.n_col; ++c) {
    float v[8];
    for (int g = 0; g < 8; ++g) v[g] = acc[c][g] - accm[c][g];
    y[c * y_stride] = hsum8(v);
  }
}

// Blocks of 32: codes in element order (signed, or unsigned for the types with a min), d, min.
struct LegacyDecoded {
  int8_t w[kQK];
  float d, m = 0;
};

// The 5th bits of Q5_0 / Q5_1: bit i of qh (a little-endian u32) belongs to element i.
uint32_t q5_high(const uint8_t* qh) {
  return uint32_t(qh[0]) | (uint32_t(qh[1]) << 8) | (uint32_t(qh[2]) << 16) | (uint32_t(qh[3]) << 24);
}
// Nibble order of Q4_0 and kin: element l < 16 the low nibble of qs[l], element l + 16 the high one.
void nibbles(const uint8_t* qs, int* u) {
  for (int l = 0; l < 16; ++l) u[l] = qs[l] & 15, u[l + 16] = qs[l] >> 4;
}

void decode_legacy(const BlockQ4_0& b, LegacyDecoded* o) {
  int u[kQK];
  nibbles(b.qs, u);
  for (int i = 0; i < kQK; ++i) o->w[i] = int8_t(u[i] - 8);
  o->d = f16_to_f32(b.d);
}
void decode_legacy(const BlockQ4_1& b, LegacyDecoded* o) {
  int u[kQK];
  nibbles(b.qs, u);
  for (int i = 0; i < kQK; ++i) o->w[i] = int8_t(u[i]);
  o->d = f16_to_f32(b.d), o->m = f16_to_f32(b.m);
}
void decode_legacy(const BlockQ5_0& b, LegacyDecoded* o) {
  int u[kQK];
  nibbles(b.qs, u);
  const uint32_t qh = q5_high(b.qh);
  for (int i = 0; i < kQK; ++i) o->w[i] = int8_t((u[i] | int((qh >> i) & 1) << 4) - 16);
  o->d = f16_to_f32(b.d);
}
void decode_legacy(const BlockQ5_1& b, LegacyDecoded* o) {
  int u[kQK];
  nibbles(b.qs, u);
  const uint32_t qh = q5_high(b.qh);
  for (int i = 0; i < kQK; ++i) o->w[i] = int8_t(u[i] | int((qh >> i) & 1) << 4);
  o->d = f16_to_f32(b.d), o->m = f16_to_f32(b.m);
}
void decode_legacy(const BlockQ8_0& b, LegacyDecoded* o) {
  std::memcpy(o->w, b.qs, kQK);
  o->d = f16_to_f32(b.d);
}
void decode_legacy(const BlockIQ4_NL& b, LegacyDecoded* o) {
  int u[kQK];
  nibbles(b.qs, u);
  for (int i = 0; i < kQK; ++i) o->w[i] = kValuesIq4nl[u[i]];
  o->d = f16_to_f32(b.d);
}

template <typename Block, bool kMin>
void dot_legacy_scalar(const void* row, const Q8ActView& x, float* y, int64_t y_stride) {
  const Block* blocks = static_cast<const Block*>(row);
  float acc[kQ8MaxCols][8] = {}, accm[kQ8MaxCols][8] = {};
  LegacyDecoded ld;
  for (int64_t b = 0; b < x.n / kQK; ++b) {
    decode_legacy(blocks[b], &ld);
    for (int c = 0; c < x.n_col; ++c) {
      const float dx = x.col_d(c)[b];
      int32_t isum = 0;
      for (int i = 0; i < kQK; ++i) isum += int32_t(ld.w[i]) * q8_act_code(x, c, b * kQK + i);
      acc[c][b % 8] = std::fma(float(isum), ld.d * dx, acc[c][b % 8]);
      if (kMin) {
        const int16_t* sx = x.col_s(c) + 2 * b;
        accm[c][b % 8] = std::fma(float(int32_t(sx[0]) + sx[1]), ld.m * dx, accm[c][b % 8]);
      }
    }
  }
  for (int c = 0; c < x.n_col; ++c) y[c * y_stride] = kMin ? hsum8(acc[c]) + hsum8(accm[c]) : hsum8(acc[c]);
}

// A type's kernels per build, [grid load][isa] (dot_q8.h's GridLoad: the same kernels twice
// where a type has no choice; the scalar reference has none either).
struct Q8Row {
  GgmlType type;
  DotQ8Fn fn[kGridLoadCount][kQ8IsaCount];
  DotQ8RowsFn rows[kGridLoadCount][kQ8IsaCount];
};
#define STRATA_Q8_FNS(t, d)                                                                           \
  {dot_q8_##t##_scalar, dot_q8_##t##d##_avx2, dot_q8_##t##d##_avxvnni, dot_q8_##t##d##_avx512vnni}
#define STRATA_Q8_ROWS_FNS(t, d)                                                                      \
  {dot_q8_rows_##t##_scalar, dot_q8_rows_##t##d##_avx2, dot_q8_rows_##t##d##_avxvnni, dot_q8_rows_##t##d##_avx512vnni}
#define STRATA_Q8_ROW(T, t) \
  {GgmlType::T, {STRATA_Q8_FNS(t, ), STRATA_Q8_FNS(t, )}, {STRATA_Q8_ROWS_FNS(t, ), STRATA_Q8_ROWS_FNS(t, )}}
#define STRATA_Q8_ROW_GRID4(T, t) \
  {GgmlType::T, {STRATA_Q8_FNS(t, ), STRATA_Q8_FNS(t, _direct)}, {STRATA_Q8_ROWS_FNS(t, ), STRATA_Q8_ROWS_FNS(t, _direct)}}
constexpr Q8Row kQ8Rows[] = {STRATA_Q8_ROW(Q4_0, q4_0),     STRATA_Q8_ROW(Q4_1, q4_1), STRATA_Q8_ROW(Q5_0, q5_0),
                             STRATA_Q8_ROW(Q5_1, q5_1),     STRATA_Q8_ROW(Q8_0, q8_0), STRATA_Q8_ROW(IQ4_NL, iq4_nl),
                             STRATA_Q8_ROW(Q2_K, q2_k),     STRATA_Q8_ROW(Q3_K, q3_k), STRATA_Q8_ROW(Q4_K, q4_k),
                             STRATA_Q8_ROW(Q5_K, q5_k),     STRATA_Q8_ROW(Q6_K, q6_k), STRATA_Q8_ROW(IQ4_XS, iq4_xs),
                             STRATA_Q8_ROW_GRID4(IQ3_XXS, iq3_xxs), STRATA_Q8_ROW_GRID4(IQ3_S, iq3_s),
                             STRATA_Q8_ROW(IQ2_XXS, iq2_xxs), STRATA_Q8_ROW(IQ2_XS, iq2_xs),
                             STRATA_Q8_ROW(IQ2_S, iq2_s),     STRATA_Q8_ROW(IQ1_S, iq1_s),
                             STRATA_Q8_ROW(IQ1_M, iq1_m)};
#undef STRATA_Q8_ROW
#undef STRATA_Q8_ROW_GRID4
#undef STRATA_Q8_FNS
#undef STRATA_Q8_ROWS_FNS

const Q8Row* q8_row(GgmlType type) {
  for (const Q8Row& r : kQ8Rows)
    if (r.type == type) return &r;
  return nullptr;
}

// VNNI flags (cpuid leaf 7: subleaf 1 EAX bit 4 = AVX-VNNI; subleaf 0 ECX bit 11 = AVX512_VNNI), on
// top of the avx2 / avx512 levels of cpu_features() (which check the OS register state), and
// switched off by any STRATA_CPU cap.
struct VnniFlags {
  bool avx_vnni = false, avx512_vnni = false;
};
VnniFlags detect_vnni() {
  VnniFlags f;
  if (std::getenv("STRATA_CPU")) return f;
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) f.avx512_vnni = cpu_features().avx512 && (c & (1u << 11));
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx_vnni = cpu_features().avx2 && (a & (1u << 4));
  return f;
}
const VnniFlags& vnni() {
  static const VnniFlags f = detect_vnni();
  return f;
}

}  // namespace

void dot_q8_q4_0_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy_scalar<BlockQ4_0, false>(r, x, y, ys); }
void dot_q8_q4_1_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy_scalar<BlockQ4_1, true>(r, x, y, ys); }
void dot_q8_q5_0_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy_scalar<BlockQ5_0, false>(r, x, y, ys); }
void dot_q8_q5_1_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy_scalar<BlockQ5_1, true>(r, x, y, ys); }
void dot_q8_q8_0_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy_scalar<BlockQ8_0, false>(r, x, y, ys); }
void dot_q8_iq4_nl_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_legacy_scalar<BlockIQ4_NL, false>(r, x, y, ys); }
void dot_q8_q2_k_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockQ2_K>(r, x, y, ys); }
void dot_q8_q3_k_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockQ3_K>(r, x, y, ys); }
void dot_q8_q4_k_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockQ4_K>(r, x, y, ys); }
void dot_q8_q5_k_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockQ5_K>(r, x, y, ys); }
void dot_q8_q6_k_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockQ6_K>(r, x, y, ys); }
void dot_q8_iq4_xs_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ4_XS>(r, x, y, ys); }
void dot_q8_iq3_xxs_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ3_XXS>(r, x, y, ys); }
void dot_q8_iq3_s_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ3_S>(r, x, y, ys); }
void dot_q8_iq2_xxs_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ2_XXS>(r, x, y, ys); }
void dot_q8_iq2_xs_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ2_XS>(r, x, y, ys); }
void dot_q8_iq2_s_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ2_S>(r, x, y, ys); }
void dot_q8_iq1_s_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ1_S>(r, x, y, ys); }
void dot_q8_iq1_m_scalar(const void* r, const Q8ActView& x, float* y, int64_t ys) { dot_k_scalar<BlockIQ1_M>(r, x, y, ys); }

// The scalar reference takes rows one at a time.
#define STRATA_Q8_SCALAR_ROWS(t)                                                                          \
  void dot_q8_rows_##t##_scalar(const void* r, int64_t rb, int nr, const Q8ActView& x, float* y, int64_t ys) { \
    for (int i = 0; i < nr; ++i) dot_q8_##t##_scalar(static_cast<const uint8_t*>(r) + i * rb, x, y + i, ys);  \
  }
STRATA_CPU_Q8_TYPES(STRATA_Q8_SCALAR_ROWS)
#undef STRATA_Q8_SCALAR_ROWS

const char* q8_isa_name(Q8Isa isa) {
  switch (isa) {
    case Q8Isa::scalar: return "scalar";
    case Q8Isa::avx2: return "avx2";
    case Q8Isa::avx_vnni: return "avx_vnni";
    case Q8Isa::avx512_vnni: return "avx512_vnni";
  }
  return "unknown";
}

bool q8_isa_supported(Q8Isa isa) {
  switch (isa) {
    case Q8Isa::scalar: return true;
    case Q8Isa::avx2: return cpu_features().avx2;
    case Q8Isa::avx_vnni: return vnni().avx_vnni;
    case Q8Isa::avx512_vnni: return vnni().avx512_vnni;
  }
  return false;
}

bool has_dot_q8(GgmlType type) { return q8_row(type) != nullptr; }

const char* grid_load_name(GridLoad load) { return load == GridLoad::direct ? "direct" : "gather"; }

DotQ8Fn dot_q8_kernel(GgmlType type, Q8Isa isa, GridLoad load) {
  const Q8Row* r = q8_row(type);
  return r ? r->fn[int(load)][int(isa)] : nullptr;
}
DotQ8RowsFn dot_q8_rows_kernel(GgmlType type, Q8Isa isa, GridLoad load) {
  const Q8Row* r = q8_row(type);
  return r ? r->rows[int(load)][int(isa)] : nullptr;
}
DotQ8Fn dot_q8_kernel(GgmlType type, Q8Isa isa) { return dot_q8_kernel(type, isa, iq3_grid_load(type)); }
DotQ8RowsFn dot_q8_rows_kernel(GgmlType type, Q8Isa isa) { return dot_q8_rows_kernel(type, isa, iq3_grid_load(type)); }

// AVX-512 VNNI first: for 3 or more columns its 512-bit body does half the instructions per
// column (dot_q8_zmm.inc), and for fewer it runs the same ymm code as AVX-VNNI. Measured on a
// Sapphire Rapids VM: no clock drop under the 512-bit vpdpbusd (a dependent imul chain beside it).
Q8Isa best_dot_q8_isa(GgmlType type) {
  if (!q8_row(type)) return Q8Isa::scalar;
  for (Q8Isa isa : {Q8Isa::avx512_vnni, Q8Isa::avx_vnni, Q8Isa::avx2})
    if (q8_isa_supported(isa)) return isa;
  return Q8Isa::scalar;
}

DotQ8Fn best_dot_q8(GgmlType type) { return q8_row(type) ? dot_q8_kernel(type, best_dot_q8_isa(type)) : nullptr; }
DotQ8RowsFn best_dot_q8_rows(GgmlType type) {
  return q8_row(type) ? dot_q8_rows_kernel(type, best_dot_q8_isa(type)) : nullptr;
}

}  // namespace strata::kernels::cpu
