// Scalar kernels of the "legacy" 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
//
// Decoding follows ggml's float evaluation order exactly ((q - 8) * d; q * d + m), so dequantised
// values are bit-identical to ggml's to_float. Dots decode one block and accumulate w * x in f32
// over eight interleaved partial sums (the exact-weights reference the SIMD dots are held to).
// Quantisers search the scale (quant_search.h); fill_random writes random codes directly.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/quant_search.h"
#include "kernels/cpu/quant/type_kernels.h"

namespace strata::kernels::cpu {
namespace {

inline uint32_t load_u32_le(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

inline void store_u32_le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

// ---- per-block decoders (y: kQK floats) ----

void decode(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = (b.qs[j] & 0x0f) - 8;
    const int x1 = (b.qs[j] >> 4) - 8;
    y[j] = float(x0) * d;
    y[j + kQK / 2] = float(x1) * d;
  }
}

void decode(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = float(b.qs[j] & 0x0f) * d + m;
    y[j + kQK / 2] = float(b.qs[j] >> 4) * d + m;
  }
}

void decode(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = int((qh >> j) & 1u) << 4;
    const int h1 = int((qh >> (j + 16)) & 1u) << 4;
    y[j] = float(((b.qs[j] & 0x0f) | h0) - 16) * d;
    y[j + kQK / 2] = float(((b.qs[j] >> 4) | h1) - 16) * d;
  }
}

void decode(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = int((qh >> j) & 1u) << 4;
    const int h1 = int((qh >> (j + 16)) & 1u) << 4;
    y[j] = float((b.qs[j] & 0x0f) | h0) * d + m;
    y[j + kQK / 2] = float((b.qs[j] >> 4) | h1) * d + m;
  }
}

void decode(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = float(b.qs[j]) * d;
}

template <typename Block>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) decode(b[i], dst + i * kQK);
}

template <typename Block>
float dot_blocks(const void* row, const float* x, int64_t n) {
  const Block* b = static_cast<const Block*>(row);
  float acc[8] = {};
  float w[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    decode(b[i], w);
    const float* xb = x + i * kQK;
    for (int j = 0; j < kQK; j += 8) {
      for (int k = 0; k < 8; ++k) acc[k] += w[j + k] * xb[j + k];
    }
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// ---- packing ----

// Nibbles: element j < 16 in the low half of qs[j], element j + 16 in the high half.
void pack_nibbles(const uint8_t* l, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = uint8_t((l[j] & 0x0f) | ((l[j + kQK / 2] & 0x0f) << 4));
}

// The 5th bits of a Q5 block: bit j of the little-endian u32 is element j's.
void pack_high_bits(const uint8_t* l, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < kQK; ++j) h |= uint32_t((l[j] >> 4) & 1u) << j;
  store_u32_le(qh, h);
}

// ---- fill_random helpers ----

// f16 bits of a positive scale, clamped to the finite normal range.
uint16_t normal_f16(float v) {
  const uint16_t h = f32_to_f16(v);
  return std::clamp<uint16_t>(h, 0x0400, 0x7bff);
}

// Fills bytes with random bits, 8 per next_u64().
void random_bytes(uint8_t* p, int n, Rng& rng) {
  for (int i = 0; i < n; i += 8) {
    const uint64_t r = rng.next_u64();
    std::memcpy(p + i, &r, size_t(std::min(8, n - i)));
  }
}

}  // namespace

// ---- Q4_0: y = (q - 8) * d ----

void dequantize_q4_0(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ4_0>(src, dst, n); }
float dot_q4_0_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ4_0>(row, x, n); }

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int8_t q[kQK];
    uint8_t l[kQK];
    b[i].d = quantize_block_scale_f16(src + i * kQK, kQK, -8, 7, q);
    for (int j = 0; j < kQK; ++j) l[j] = uint8_t(q[j] + 8);
    pack_nibbles(l, b[i].qs);
  }
}

// Uniform codes: E[(q - 8)^2] = 255/12 + 1/4 = 21.5. A random sign of d per block cancels the
// -0.5 mean of (q - 8).
void fill_random_q4_0(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
  const uint16_t d = normal_f16(std / std::sqrt(21.5f));
  for (int64_t i = 0; i < n / kQK; ++i) {
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
    b[i].d = uint16_t(d | ((rng.next_u64() >> 63) << 15));
  }
}

// ---- Q4_1: y = q * d + m ----

void dequantize_q4_1(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ4_1>(src, dst, n); }
float dot_q4_1_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ4_1>(row, x, n); }

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  BlockQ4_1* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint8_t l[kQK];
    quantize_block_scale_min_f16(src + i * kQK, kQK, 15, &b[i].d, &b[i].m, l);
    pack_nibbles(l, b[i].qs);
  }
}

// Uniform codes: var(q) = 255/12; m = -7.5 d centres them.
void fill_random_q4_1(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ4_1* b = static_cast<BlockQ4_1*>(dst);
  // d's 4 low mantissa bits cleared so that 7.5 * d = 15 * d / 2 is exact in f16.
  const uint16_t d = uint16_t(normal_f16(std / std::sqrt(255.0f / 12.0f)) & ~15u);
  const uint16_t m = uint16_t(0x8000u | normal_f16(7.5f * f16_to_f32(d)));
  for (int64_t i = 0; i < n / kQK; ++i) {
    b[i].d = d;
    b[i].m = m;
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
  }
}

// ---- Q5_0: y = (q - 16) * d ----

void dequantize_q5_0(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ5_0>(src, dst, n); }
float dot_q5_0_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ5_0>(row, x, n); }

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  BlockQ5_0* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int8_t q[kQK];
    uint8_t l[kQK];
    b[i].d = quantize_block_scale_f16(src + i * kQK, kQK, -16, 15, q);
    for (int j = 0; j < kQK; ++j) l[j] = uint8_t(q[j] + 16);
    pack_nibbles(l, b[i].qs);
    pack_high_bits(l, b[i].qh);
  }
}

// Uniform codes: E[(q - 16)^2] = 1023/12 + 1/4 = 85.5; random sign of d per block.
void fill_random_q5_0(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ5_0* b = static_cast<BlockQ5_0*>(dst);
  const uint16_t d = normal_f16(std / std::sqrt(85.5f));
  for (int64_t i = 0; i < n / kQK; ++i) {
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
    const uint64_t r = rng.next_u64();
    store_u32_le(b[i].qh, uint32_t(r));
    b[i].d = uint16_t(d | ((r >> 32) & 1u) << 15);
  }
}

// ---- Q5_1: y = q * d + m ----

void dequantize_q5_1(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ5_1>(src, dst, n); }
float dot_q5_1_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ5_1>(row, x, n); }

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  BlockQ5_1* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint8_t l[kQK];
    quantize_block_scale_min_f16(src + i * kQK, kQK, 31, &b[i].d, &b[i].m, l);
    pack_nibbles(l, b[i].qs);
    pack_high_bits(l, b[i].qh);
  }
}

// Uniform codes: var(q) = 1023/12; m = -15.5 d centres them.
void fill_random_q5_1(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ5_1* b = static_cast<BlockQ5_1*>(dst);
  // d's 5 low mantissa bits cleared so that 15.5 * d = 31 * d / 2 is exact in f16.
  const uint16_t d = uint16_t(normal_f16(std / std::sqrt(1023.0f / 12.0f)) & ~31u);
  const uint16_t m = uint16_t(0x8000u | normal_f16(15.5f * f16_to_f32(d)));
  for (int64_t i = 0; i < n / kQK; ++i) {
    b[i].d = d;
    b[i].m = m;
    random_bytes(b[i].qs, sizeof(b[i].qs), rng);
    store_u32_le(b[i].qh, uint32_t(rng.next_u64()));
  }
}

// ---- Q8_0: y = q * d ----

void dequantize_q8_0(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ8_0>(src, dst, n); }
float dot_q8_0_scalar(const void* row, const float* x, int64_t n) { return dot_blocks<BlockQ8_0>(row, x, n); }

// Codes stay in [-127, 127] like ggml's: SIMD dots elsewhere (llama.cpp's among them) take |q|
// with sign tricks that break on -128.
void quantize_q8_0(const float* src, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    b[i].d = quantize_block_scale_f16(src + i * kQK, kQK, -127, 127, b[i].qs);
  }
}

// Codes are random bytes arithmetically shifted right by k (k = 0 for std >= ~5e-3; larger for a
// smaller std so that d stays a normal f16), with a random sign of d per block cancelling their
// -0.5 mean. -128 (k = 0 only) becomes -127: codes stay in ggml's [-127, 127] and E[q^2] moves
// by 255/256 of a level, negligible.
void fill_random_q8_0(void* dst, int64_t n, Rng& rng, float std) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  int k = 0;
  float mean_q2 = 0;
  for (; k < 7; ++k) {
    double s = 0;
    for (int v = -128; v < 128; ++v) s += double(v >> k) * (v >> k);
    mean_q2 = float(s / 256);
    if (std / std::sqrt(mean_q2) >= 0x1p-14f) break;
  }
  const uint16_t d = normal_f16(std / std::sqrt(mean_q2));
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint8_t r[kQK];
    random_bytes(r, kQK, rng);
    for (int j = 0; j < kQK; ++j) {
      const int q = int(int8_t(r[j])) >> k;
      b[i].qs[j] = int8_t(q < -127 ? -127 : q);
    }
    b[i].d = uint16_t(d | ((rng.next_u64() >> 63) << 15));
  }
}

}  // namespace strata::kernels::cpu
