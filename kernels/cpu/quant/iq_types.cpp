// Scalar kernels of the i-quants: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (lattice
// grids, iq_grids.h) and IQ4_NL, IQ4_XS (16 non-linear levels). Layouts in blocks.h.
//
// Decoding follows ggml's float evaluation order exactly (the sub-block factor is a float first,
// e.g. (d * (0.5 + s)) * 0.25, then times the grid value, then the sign), so dequantised values are
// bit-identical to ggml's to_float. Dots decode one block and accumulate w * x in f32 over eight
// interleaved partial sums, as the K types do. fill_random writes random codes and sets each
// block's scale from the decoded block so the values have the requested standard deviation.
// The quantisers live in iq4_quant.cpp (IQ4_NL / IQ4_XS) and iq_grid_quant.cpp (the grid types),
// both with an optional importance matrix (iq_quant.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Byte j of a grid entry, as the unsigned magnitude (IQ2/IQ3) or the signed value (IQ1).
inline float grid_u8(uint64_t g, int j) { return float(uint8_t(g >> (8 * j))); }
inline float grid_i8(uint64_t g, int j) { return float(int8_t(uint8_t(g >> (8 * j)))); }
inline float sign_of(unsigned signs, int j) { return (signs >> j) & 1 ? -1.0f : 1.0f; }

// 8 elements of a 2-bit grid entry with their 8 sign bits, all scaled by dl.
inline void put8(float* y, float dl, uint64_t g, unsigned signs) {
  for (int j = 0; j < 8; ++j) y[j] = dl * grid_u8(g, j) * sign_of(signs, j);
}

// ---- per-block decoders ----

void decode(const BlockIQ2_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib, y += 32) {
    const uint32_t idx = load_u32(b.qs + 4 * ib);   // 4 grid indices, one per byte
    const uint32_t meta = load_u32(b.qs + 4 * ib + 2);  // 4 x 7 sign bits, 4-bit scale on top
    const float db = d * (0.5f + float(meta >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      put8(y + 8 * l, db, kIq2xxsGrid.v[(idx >> (8 * l)) & 255], kKsignsIq2xs.v[(meta >> (7 * l)) & 127]);
    }
  }
}

void decode(const BlockIQ2_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib, y += 32) {
    const float db[2] = {d * (0.5f + float(b.scales[ib] & 15)) * 0.25f,
                         d * (0.5f + float(b.scales[ib] >> 4)) * 0.25f};
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = b.qs[4 * ib + l];
      put8(y + 8 * l, db[l / 2], kIq2xsGrid.v[q & 511], kKsignsIq2xs.v[q >> 9]);
    }
  }
}

void decode(const BlockIQ2_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint8_t* signs = b.qs + kQK_K / 8;
  for (int ib = 0; ib < 8; ++ib, y += 32) {
    const float db[2] = {d * (0.5f + float(b.scales[ib] & 15)) * 0.25f,
                         d * (0.5f + float(b.scales[ib] >> 4)) * 0.25f};
    for (int l = 0; l < 4; ++l) {
      const unsigned idx = b.qs[4 * ib + l] | (((b.qh[ib] >> (2 * l)) & 3u) << 8);
      put8(y + 8 * l, db[l / 2], kIq2sGrid.v[idx], signs[4 * ib + l]);
    }
  }
}

void decode(const BlockIQ3_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint8_t* qs = b.qs;
  const uint8_t* meta_bytes = b.qs + kQK_K / 4;
  for (int ib = 0; ib < 8; ++ib, y += 32, qs += 8) {
    const uint32_t meta = load_u32(meta_bytes + 4 * ib);
    const float db = d * (0.5f + float(meta >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const unsigned signs = kKsignsIq2xs.v[(meta >> (7 * l)) & 127];
      const uint32_t g1 = kIq3xxsGrid.v[qs[2 * l]], g2 = kIq3xxsGrid.v[qs[2 * l + 1]];
      for (int j = 0; j < 4; ++j) {
        y[8 * l + j] = db * grid_u8(g1, j) * sign_of(signs, j);
        y[8 * l + 4 + j] = db * grid_u8(g2, j) * sign_of(signs, j + 4);
      }
    }
  }
}

void decode(const BlockIQ3_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib, y += 32) {
    const int s = (b.scales[ib / 2] >> (4 * (ib % 2))) & 15;
    const float db = d * float(1 + 2 * s);
    const uint8_t* qs = b.qs + 8 * ib;
    const unsigned qh = b.qh[ib];
    for (int l = 0; l < 4; ++l) {
      const unsigned signs = b.signs[4 * ib + l];
      const uint32_t g1 = kIq3sGrid.v[qs[2 * l] | (((qh >> (2 * l)) & 1u) << 8)];
      const uint32_t g2 = kIq3sGrid.v[qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1u) << 8)];
      for (int j = 0; j < 4; ++j) {
        y[8 * l + j] = db * grid_u8(g1, j) * sign_of(signs, j);
        y[8 * l + 4 + j] = db * grid_u8(g2, j) * sign_of(signs, j + 4);
      }
    }
  }
}

void decode(const BlockIQ1_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib, y += 32) {
    const unsigned h = b.qh[ib];
    const float dl = d * float(2 * ((h >> 12) & 7) + 1);
    const float delta = (h & 0x8000) ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = kIq1sGrid.v[b.qs[4 * ib + l] | (((h >> (3 * l)) & 7u) << 8)];
      for (int j = 0; j < 8; ++j) y[8 * l + j] = dl * (grid_i8(g, j) + delta);
    }
  }
}

void decode(const BlockIQ1_M& b, float* y) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  const float d = f16_to_f32(iq1m_d_bits(sc));
  for (int ib = 0; ib < 8; ++ib, y += 32) {
    const unsigned s = sc[ib / 2] >> (6 * (ib % 2));
    const float dl[2] = {d * float(2 * (s & 7) + 1), d * float(2 * ((s >> 3) & 7) + 1)};
    for (int l = 0; l < 4; ++l) {
      const unsigned h = b.qh[2 * ib + l / 2] >> (4 * (l % 2));  // this group's nibble
      const uint64_t g = kIq1sGrid.v[b.qs[4 * ib + l] | ((h & 7u) << 8)];
      const float delta = (h & 8) ? -kIq1Delta : kIq1Delta;
      for (int j = 0; j < 8; ++j) y[8 * l + j] = dl[l / 2] * (grid_i8(g, j) + delta);
    }
  }
}

void decode(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * float(kValuesIq4nl[b.qs[j] & 15]);
    y[j + kQK / 2] = d * float(kValuesIq4nl[b.qs[j] >> 4]);
  }
}

void decode(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib, y += 32) {
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b.scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * float(ls - 32);
    const uint8_t* qs = b.qs + 16 * ib;
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * float(kValuesIq4nl[qs[j] & 15]);
      y[j + 16] = dl * float(kValuesIq4nl[qs[j] >> 4]);
    }
  }
}

template <typename Block, int kN>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kN; ++i) decode(b[i], dst + i * kN);
}

template <typename Block, int kN>
float dot_blocks(const void* row, const float* x, int64_t n) {
  const Block* b = static_cast<const Block*>(row);
  float acc[8] = {};
  float w[kN];
  for (int64_t i = 0; i < n / kN; ++i) {
    decode(b[i], w);
    const float* xb = x + i * kN;
    for (int j = 0; j < kN; j += 8) {
      for (int k = 0; k < 8; ++k) acc[k] += w[j + k] * xb[j + k];
    }
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// ---- fill_random ----

// Writes the f16 bits h as the block's super-scale (IQ1_M spreads it over its scale words).
template <typename Block>
void set_scale(Block& b, uint16_t h) { b.d = h; }
template <>
void set_scale(BlockIQ1_M& b, uint16_t h) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  for (int k = 0; k < 4; ++k) sc[k] = uint16_t((sc[k] & 0x0fff) | (((h >> (4 * k)) & 15u) << 12));
  std::memcpy(b.scales, sc, sizeof sc);
}

// Random bytes for every code, scale and sign; then the super-scale that gives the block an RMS
// of `std`, with a random sign (IQ4_NL's levels and IQ1's grid are not symmetric about zero; a
// random sign per block centres the values).
template <typename Block, int kN>
void fill_random_blocks(void* dst, int64_t n, Rng& rng, float std) {
  Block* blocks = static_cast<Block*>(dst);
  float y[kN];
  for (int64_t i = 0; i < n / kN; ++i) {
    Block& b = blocks[i];
    auto* bytes = reinterpret_cast<uint8_t*>(&b);
    for (size_t k = 0; k < sizeof(Block); k += 8) {
      const uint64_t r = rng.next_u64();
      std::memcpy(bytes + k, &r, std::min<size_t>(8, sizeof(Block) - k));
    }
    set_scale(b, 0x3c00);  // 1.0: measure the block's RMS at unit scale
    decode(b, y);
    double s2 = 0;
    for (float v : y) s2 += double(v) * v;
    const double rms = std::sqrt(s2 / kN);
    const uint16_t sign = (rng.next_u64() & 1) ? 0x8000 : 0;
    set_scale(b, rms > 0 ? uint16_t(f32_to_f16(float(std / rms)) | sign) : uint16_t(0));
  }
}

}  // namespace

#define STRATA_IQ_SCALAR_KERNELS(t, Block, kN)                                                   \
  void dequantize_##t(const void* src, float* dst, int64_t n) { dequantize_blocks<Block, kN>(src, dst, n); } \
  float dot_##t##_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<Block, kN>(row, x, n); } \
  void fill_random_##t(void* dst, int64_t n, Rng& rng, float std) { fill_random_blocks<Block, kN>(dst, n, rng, std); }

STRATA_IQ_SCALAR_KERNELS(iq2_xxs, BlockIQ2_XXS, kQK_K)
STRATA_IQ_SCALAR_KERNELS(iq2_xs, BlockIQ2_XS, kQK_K)
STRATA_IQ_SCALAR_KERNELS(iq2_s, BlockIQ2_S, kQK_K)
STRATA_IQ_SCALAR_KERNELS(iq3_xxs, BlockIQ3_XXS, kQK_K)
STRATA_IQ_SCALAR_KERNELS(iq3_s, BlockIQ3_S, kQK_K)
STRATA_IQ_SCALAR_KERNELS(iq1_s, BlockIQ1_S, kQK_K)
STRATA_IQ_SCALAR_KERNELS(iq1_m, BlockIQ1_M, kQK_K)
STRATA_IQ_SCALAR_KERNELS(iq4_nl, BlockIQ4_NL, kQK)
STRATA_IQ_SCALAR_KERNELS(iq4_xs, BlockIQ4_XS, kQK_K)
#undef STRATA_IQ_SCALAR_KERNELS

}  // namespace strata::kernels::cpu
