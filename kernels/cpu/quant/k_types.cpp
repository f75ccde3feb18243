// Scalar kernels of the K types Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (256-element super-blocks).
//
// Decoding follows ggml's float evaluation order exactly (the sub-block factor d * scale is a
// float first, then times q, then minus the float d_min * min), so dequantised values are
// bit-identical to ggml's to_float. Dots decode one super-block and accumulate w * x in f32 over
// eight interleaved partial sums. Quantisers search scales and mins (quant_search.h);
// fill_random writes random codes and sub-block scales directly.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/quant_search.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

// ---- packed 6-bit scales ----

// Decoders of the packed scales: k4_scale_min, q3_scale_code (blocks.h).

void pack_k4_scales(const int* sc, const int* m, uint8_t* q) {
  std::memset(q, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] |= uint8_t(sc[j] & 63);
      q[j + 4] |= uint8_t(m[j] & 63);
    } else {
      q[j + 4] = uint8_t((sc[j] & 15) | ((m[j] & 15) << 4));
      q[j - 4] |= uint8_t((sc[j] >> 4) << 6);
      q[j] |= uint8_t((m[j] >> 4) << 6);
    }
  }
}

// Q3_K's packed codes: the inverse of q3_scale_code (blocks.h).
void pack_q3_scales(const int* code, uint8_t* s) {
  std::memset(s, 0, kKScaleBytes);
  for (int i = 0; i < 16; ++i) {
    if (i < 8) {
      s[i] |= uint8_t(code[i] & 15);
    } else {
      s[i - 8] |= uint8_t((code[i] & 15) << 4);
    }
    s[8 + i % 4] |= uint8_t(((code[i] >> 4) & 3) << (2 * (i / 4)));
  }
}

// ---- per-super-block decoders (y: kQK_K floats) ----

void decode(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = b.scales[is++];
        const float dl = d * float(sc & 15), ml = dmin * float(sc >> 4);
        const uint8_t* qp = q + 16 * part;
        for (int l = 0; l < 16; ++l) *y++ = dl * float((qp[l] >> shift) & 3) - ml;
      }
    }
  }
}

void decode(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint8_t* q = b.qs;
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d * float(q3_scale_code(is++, b.scales) - 32);
        const uint8_t* qp = q + 16 * part;
        const uint8_t* hp = b.hmask + 16 * part;
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * float(int((qp[l] >> shift) & 3) - ((hp[l] & m) ? 0 : 4));
        }
      }
    }
  }
}

void decode(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const uint8_t* q = b.qs;
  for (int is = 0; is < 8; is += 2, q += 32) {
    int sc, m;
    k4_scale_min(is, b.scales, &sc, &m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    k4_scale_min(is + 1, b.scales, &sc, &m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 15) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
  }
}

void decode(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const uint8_t* ql = b.qs;
  uint8_t u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2, ql += 32, u1 = uint8_t(u1 << 2), u2 = uint8_t(u2 << 2)) {
    int sc, m;
    k4_scale_min(is, b.scales, &sc, &m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    k4_scale_min(is + 1, b.scales, &sc, &m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 15) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
  }
}

void decode(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int chunk = 0; chunk < 2; ++chunk, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
  }
}

template <typename Block>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) decode(b[i], dst + i * kQK_K);
}

template <typename Block>
float dot_blocks(const void* row, const float* x, int64_t n) {
  const Block* b = static_cast<const Block*>(row);
  float acc[8] = {};
  float w[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    decode(b[i], w);
    const float* xb = x + i * kQK_K;
    for (int j = 0; j < kQK_K; j += 8) {
      for (int k = 0; k < 8; ++k) acc[k] += w[j + k] * xb[j + k];
    }
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// ---- 2-bit planes of Q2_K / Q3_K ----

// Element 128 * half + 32 * j + l (l < 32) keeps its 2 low bits in qs[32 * half + l] at bit 2j.
void pack_2bit(const uint8_t* c, uint8_t* qs) {
  std::memset(qs, 0, kQK_K / 4);
  for (int e = 0; e < kQK_K; ++e) {
    const int half = e / 128, j = (e % 128) / 32, l = e % 32;
    qs[32 * half + l] |= uint8_t((c[e] & 3) << (2 * j));
  }
}

// ---- fill_random helpers ----

// Random bytes, 8 per next_u64().
void random_bytes(uint8_t* p, int n, Rng& rng) {
  for (int i = 0; i < n; i += 8) {
    const uint64_t r = rng.next_u64();
    std::memcpy(p + i, &r, size_t(std::min(8, n - i)));
  }
}

// Mean of k^2 over the integers of [a, b].
float mean_sq(int a, int b) {
  double s = 0;
  for (int k = a; k <= b; ++k) s += double(k) * k;
  return float(s / (b - a + 1));
}

// f16 bits of a positive super-scale: finite, normal, with the `clear` mask of low mantissa bits
// zeroed so that its product with a centring constant is exact in f16 (k/2 with k of b bits needs
// b low bits free: 1.5 -> 2, 7.5 -> 4, 15.5 -> 5).
uint16_t fill_scale_f16(float v, unsigned clear) {
  const uint16_t h = std::clamp<uint16_t>(f32_to_f16(v), 0x0400, 0x7bff);
  return uint16_t(h & ~clear);
}

// Sub-block scale magnitudes are drawn uniform in [2^b, 2^(b+1) - 1] (the upper half of the
// range: every code level in use). b is the largest <= b_max for which the super-scale
// d = std / sqrt(E[ls^2] * E[q^2]) stays a normal f16, so small std keeps its value (at the
// price of coarser sub-block scales) instead of being clamped up to the smallest normal d.
int scale_bits(float std, float mean_q2, int b_max) {
  for (int b = b_max; b > 0; --b) {
    const float d = std / std::sqrt(mean_sq(1 << b, (2 << b) - 1) * mean_q2);
    if (d >= 0x1p-13f) return b;  // one binade of margin for the cleared mantissa bits
  }
  return 0;
}

// Affine K types: codes uniform in [0, qmax] have mean qmax / 2; with min = scale (lm = ls) and
// dmin = (qmax / 2) * d every sub-block decodes to d * ls * (q - qmax / 2): centred exactly.
struct AffineFill {
  uint16_t d, dmin;
  int ls_lo;
  uint64_t ls_mask;  // ls = ls_lo + (random & ls_mask)
};
AffineFill affine_fill(float std, int qmax, int b_max, unsigned clear) {
  const float var_q = (float(qmax + 1) * float(qmax + 1) - 1.0f) / 12.0f;
  const int b = scale_bits(std, var_q, b_max);
  const int ls_lo = 1 << b;
  const float d = std / std::sqrt(mean_sq(ls_lo, 2 * ls_lo - 1) * var_q);
  AffineFill f;
  f.d = fill_scale_f16(d, clear);
  f.dmin = fill_scale_f16(0.5f * float(qmax) * f16_to_f32(f.d), 0);
  f.ls_lo = ls_lo;
  f.ls_mask = uint64_t(ls_lo - 1);
  return f;
}

}  // namespace

// ---- Q2_K ----

void dequantize_q2_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ2_K>(src, dst, n); }
float dot_q2_k_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ2_K>(row, x, n); }

void quantize_q2_k(const float* src, void* dst, int64_t n) {
  BlockQ2_K* b = static_cast<BlockQ2_K*>(dst);
  const AffineSuperSpec spec{16, 16, 3, 15, 15};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int ls[16], lm[16];
    uint8_t q[kQK_K];
    quantize_super_scale_min(src + i * kQK_K, spec, &b[i].d, &b[i].dmin, ls, lm, q);
    for (int j = 0; j < 16; ++j) b[i].scales[j] = uint8_t(ls[j] | (lm[j] << 4));
    pack_2bit(q, b[i].qs);
  }
}

void fill_random_q2_k(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ2_K* b = static_cast<BlockQ2_K*>(dst);
  const AffineFill f = affine_fill(std, 3, 3, 3u);  // scales up to 8..15; 1.5 * d exact
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    b[i].d = f.d;
    b[i].dmin = f.dmin;
    uint64_t r = rng.next_u64();
    for (int j = 0; j < 16; ++j, r >>= 3) {
      const int ls = f.ls_lo + int(r & f.ls_mask);
      b[i].scales[j] = uint8_t(ls | (ls << 4));
    }
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
  }
}

// ---- Q3_K ----

void dequantize_q3_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ3_K>(src, dst, n); }
float dot_q3_k_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ3_K>(row, x, n); }

void quantize_q3_k(const float* src, void* dst, int64_t n) {
  BlockQ3_K* b = static_cast<BlockQ3_K*>(dst);
  const SymSuperSpec spec{16, 16, -4, 3, -32, 31};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int ls[16];
    int8_t q[kQK_K];
    b[i].d = quantize_super_scale(src + i * kQK_K, spec, ls, q);
    int code[16];
    for (int j = 0; j < 16; ++j) code[j] = ls[j] + 32;
    pack_q3_scales(code, b[i].scales);
    // 3-bit code c = q + 4: low 2 bits in qs; bit 2 in hmask (set: no -4 offset). Element
    // 128 * half + 32 * j + l keeps it in hmask[l] at bit 4 * half + j.
    uint8_t c[kQK_K];
    std::memset(b[i].hmask, 0, sizeof(b[i].hmask));
    for (int e = 0; e < kQK_K; ++e) {
      c[e] = uint8_t(q[e] + 4);
      if (c[e] & 4) b[i].hmask[e % 32] |= uint8_t(1u << (e / 32));
    }
    pack_2bit(c, b[i].qs);
  }
}

// Codes uniform in [-4, 3]: E[q^2] = 63/12 + 1/4 = 5.5. Sub-block scales of magnitude 16..31
// (fewer for a tiny std, see scale_bits) with a random sign (which also cancels the -0.5 mean of
// q).
void fill_random_q3_k(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ3_K* b = static_cast<BlockQ3_K*>(dst);
  const int lo = 1 << scale_bits(std, 5.5f, 4);
  const uint64_t mask = uint64_t(lo - 1);
  const uint16_t d = fill_scale_f16(std / std::sqrt(mean_sq(lo, 2 * lo - 1) * 5.5f), 0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    b[i].d = d;
    uint64_t r = rng.next_u64();
    const uint64_t signs = rng.next_u64();
    int code[16];
    for (int j = 0; j < 16; ++j, r >>= 4) {
      const int mag = lo + int(r & mask);
      code[j] = 32 + (((signs >> j) & 1u) ? -mag : mag);
    }
    pack_q3_scales(code, b[i].scales);
    random_bytes(b[i].hmask, sizeof(b[i].hmask), rng);
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
  }
}

// ---- Q4_K ----

void dequantize_q4_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ4_K>(src, dst, n); }
float dot_q4_k_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ4_K>(row, x, n); }

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  BlockQ4_K* b = static_cast<BlockQ4_K*>(dst);
  const AffineSuperSpec spec{8, 32, 15, 63, 63};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int ls[8], lm[8];
    uint8_t q[kQK_K];
    quantize_super_scale_min(src + i * kQK_K, spec, &b[i].d, &b[i].dmin, ls, lm, q);
    pack_k4_scales(ls, lm, b[i].scales);
    // Each 64 elements share 32 bytes: the first 32 in the low nibbles, the next 32 high.
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * c + l] = uint8_t(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
      }
    }
  }
}

void fill_random_q4_k(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ4_K* b = static_cast<BlockQ4_K*>(dst);
  const AffineFill f = affine_fill(std, 15, 5, 15u);  // scales up to 32..63; 7.5 * d exact
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    b[i].d = f.d;
    b[i].dmin = f.dmin;
    uint64_t r = rng.next_u64();
    int ls[8];
    for (int j = 0; j < 8; ++j, r >>= 5) ls[j] = f.ls_lo + int(r & f.ls_mask);
    pack_k4_scales(ls, ls, b[i].scales);
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
  }
}

// ---- Q5_K ----

void dequantize_q5_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ5_K>(src, dst, n); }
float dot_q5_k_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ5_K>(row, x, n); }

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  BlockQ5_K* b = static_cast<BlockQ5_K*>(dst);
  const AffineSuperSpec spec{8, 32, 31, 63, 63};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int ls[8], lm[8];
    uint8_t q[kQK_K];
    quantize_super_scale_min(src + i * kQK_K, spec, &b[i].d, &b[i].dmin, ls, lm, q);
    pack_k4_scales(ls, lm, b[i].scales);
    // As Q4_K for the low nibbles; the 5th bit of element 64c + l goes to qh[l] bit 2c, of
    // element 64c + 32 + l to bit 2c + 1.
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        b[i].qs[32 * c + l] = uint8_t((lo & 15) | ((hi & 15) << 4));
        b[i].qh[l] |= uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void fill_random_q5_k(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ5_K* b = static_cast<BlockQ5_K*>(dst);
  const AffineFill f = affine_fill(std, 31, 5, 31u);  // scales up to 32..63; 15.5 * d exact
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    b[i].d = f.d;
    b[i].dmin = f.dmin;
    uint64_t r = rng.next_u64();
    int ls[8];
    for (int j = 0; j < 8; ++j, r >>= 5) ls[j] = f.ls_lo + int(r & f.ls_mask);
    pack_k4_scales(ls, ls, b[i].scales);
    random_bytes(b[i].qh, sizeof(b[i].qh), rng);
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
  }
}

// ---- Q6_K ----

void dequantize_q6_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ6_K>(src, dst, n); }
float dot_q6_k_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ6_K>(row, x, n); }

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  BlockQ6_K* b = static_cast<BlockQ6_K*>(dst);
  const SymSuperSpec spec{16, 16, -32, 31, -128, 127};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int ls[16];
    int8_t q[kQK_K];
    b[i].d = quantize_super_scale(src + i * kQK_K, spec, ls, q);
    for (int j = 0; j < 16; ++j) b[i].scales[j] = int8_t(ls[j]);
    // 6-bit code c = q + 32. In each 128-element chunk, element 32k + l (l < 32) keeps its low
    // nibble in ql[l + 32 * (k & 1)] (low half for k < 2, high half for k >= 2) and its top 2 bits
    // in qh[l] at bit 2k.
    std::memset(b[i].ql, 0, sizeof(b[i].ql));
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int chunk = 0; chunk < 2; ++chunk) {
      uint8_t* ql = b[i].ql + 64 * chunk;
      uint8_t* qh = b[i].qh + 32 * chunk;
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          const int c = q[128 * chunk + 32 * k + l] + 32;
          ql[l + 32 * (k & 1)] |= uint8_t((c & 15) << (k >= 2 ? 4 : 0));
          qh[l] |= uint8_t((c >> 4) << (2 * k));
        }
      }
    }
  }
}

// Codes uniform in [-32, 31]: E[q^2] = 4095/12 + 1/4 = 341.5. Sub-block scales of magnitude
// 64..127 (fewer for a small std, see scale_bits) with a random sign (which also cancels the
// -0.5 mean of q).
void fill_random_q6_k(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ6_K* b = static_cast<BlockQ6_K*>(dst);
  const int lo = 1 << scale_bits(std, 341.5f, 6);
  const int mask = lo - 1;
  const uint16_t d = fill_scale_f16(std / std::sqrt(mean_sq(lo, 2 * lo - 1) * 341.5f), 0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    b[i].d = d;
    uint8_t r[16];
    random_bytes(r, 16, rng);
    for (int j = 0; j < 16; ++j) {
      const int mag = lo + (r[j] & mask);
      b[i].scales[j] = int8_t((r[j] & 128) ? -mag : mag);
    }
    random_bytes(b[i].ql, sizeof(b[i].ql), rng);
    random_bytes(b[i].qh, sizeof(b[i].qh), rng);
  }
}

}  // namespace strata::kernels::cpu
