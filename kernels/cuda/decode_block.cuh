// Per-type device decoders of GGML blocks to f32, bit-identical to the CPU decoders
// (kernels/cpu/quant/{float,legacy,k}_types.cpp): the same float operations in the same order,
// written with __fmul_rn / __fadd_rn / __fsub_rn so that nvcc cannot contract them into FMAs
// (an FMA rounds once where the CPU rounds twice, and the results would differ in the last bit).
//
// decode_elem<Block>(b, j) returns element j of one block; decode_block(type, blk, y) decodes a
// whole block (block_size(type) floats). Layouts: kernels/cpu/quant/blocks.h.
#pragma once

#include <cstdint>

#include "core/ggml_type.h"
#include "kernels/cpu/quant/blocks.h"

namespace strata::kernels::cuda {

using cpu::BlockQ2_K;
using cpu::BlockQ3_K;
using cpu::BlockQ4_0;
using cpu::BlockQ4_1;
using cpu::BlockQ4_K;
using cpu::BlockQ5_0;
using cpu::BlockQ5_1;
using cpu::BlockQ5_K;
using cpu::BlockQ6_K;
using cpu::BlockQ8_0;

// IEEE binary16 bits -> f32, exact (subnormals included), as core/half.h.
__device__ __forceinline__ float dev_f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    const float f = __fmul_rn(float(mant), 0x1p-24f);
    return sign ? -f : f;
  }
  return __uint_as_float(bits);
}

__device__ __forceinline__ float dev_bf16_to_f32(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// Unaligned-safe little-endian loads (blocks are only 2-byte aligned inside a row).
__device__ __forceinline__ uint16_t ld_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
__device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// ---- legacy 32-element types: element j < 16 is the low nibble of qs[j], j >= 16 the high
// nibble of qs[j - 16]; the 5th bit of element j is bit j of qh. ----

__device__ __forceinline__ int nibble(const uint8_t* qs, int j) {
  return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
}

__device__ __forceinline__ float decode_elem(const BlockQ4_0& b, int j) {
  return __fmul_rn(float(nibble(b.qs, j) - 8), dev_f16_to_f32(b.d));
}
__device__ __forceinline__ float decode_elem(const BlockQ4_1& b, int j) {
  return __fadd_rn(__fmul_rn(float(nibble(b.qs, j)), dev_f16_to_f32(b.d)), dev_f16_to_f32(b.m));
}
__device__ __forceinline__ float decode_elem(const BlockQ5_0& b, int j) {
  const int h = int((ld_u32(b.qh) >> j) & 1u) << 4;
  return __fmul_rn(float((nibble(b.qs, j) | h) - 16), dev_f16_to_f32(b.d));
}
__device__ __forceinline__ float decode_elem(const BlockQ5_1& b, int j) {
  const int h = int((ld_u32(b.qh) >> j) & 1u) << 4;
  return __fadd_rn(__fmul_rn(float(nibble(b.qs, j) | h), dev_f16_to_f32(b.d)), dev_f16_to_f32(b.m));
}
__device__ __forceinline__ float decode_elem(const BlockQ8_0& b, int j) {
  return __fmul_rn(float(b.qs[j]), dev_f16_to_f32(b.d));
}

// ---- K types (256-element super-blocks) ----

// Q4_K / Q5_K packed 6-bit (scale, min) pair j.
__device__ __forceinline__ void k4_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q2_K / Q3_K: element j = half * 128 + shift_idx * 32 + part * 16 + l.
__device__ __forceinline__ float decode_elem(const BlockQ2_K& b, int j) {
  const int half = j >> 7, r = j & 127, si = r >> 5, part = (r >> 4) & 1, l = r & 15;
  const uint8_t sc = b.scales[half * 8 + si * 2 + part];
  const float d = dev_f16_to_f32(b.d), dmin = dev_f16_to_f32(b.dmin);
  const float dl = __fmul_rn(d, float(sc & 15)), ml = __fmul_rn(dmin, float(sc >> 4));
  const int q = (b.qs[half * 32 + part * 16 + l] >> (2 * si)) & 3;
  return __fsub_rn(__fmul_rn(dl, float(q)), ml);
}

__device__ __forceinline__ float decode_elem(const BlockQ3_K& b, int j) {
  const int half = j >> 7, r = j & 127, si = r >> 5, part = (r >> 4) & 1, l = r & 15;
  const int is = half * 8 + si * 2 + part;
  const int lo = is < 8 ? (b.scales[is] & 15) : (b.scales[is - 8] >> 4);
  const int hi = (b.scales[8 + is % 4] >> (2 * (is / 4))) & 3;
  const float dl = __fmul_rn(dev_f16_to_f32(ld_u16(reinterpret_cast<const uint8_t*>(&b.d))), float((lo | (hi << 4)) - 32));
  const uint8_t m = uint8_t(1u << (half * 4 + si));
  const int q = int((b.qs[half * 32 + part * 16 + l] >> (2 * si)) & 3) - ((b.hmask[part * 16 + l] & m) ? 0 : 4);
  return __fmul_rn(dl, float(q));
}

// Q4_K / Q5_K: element j = chunk * 64 + hi * 32 + l (hi: high nibble, sub-block 2 * chunk + hi).
__device__ __forceinline__ float decode_elem(const BlockQ4_K& b, int j) {
  const int chunk = j >> 6, hi = (j >> 5) & 1, l = j & 31;
  int sc, m;
  k4_scale_min(2 * chunk + hi, b.scales, &sc, &m);
  const float d1 = __fmul_rn(dev_f16_to_f32(b.d), float(sc)), m1 = __fmul_rn(dev_f16_to_f32(b.dmin), float(m));
  const uint8_t qb = b.qs[chunk * 32 + l];
  const int q = hi ? (qb >> 4) : (qb & 15);
  return __fsub_rn(__fmul_rn(d1, float(q)), m1);
}

__device__ __forceinline__ float decode_elem(const BlockQ5_K& b, int j) {
  const int chunk = j >> 6, hi = (j >> 5) & 1, l = j & 31;
  int sc, m;
  k4_scale_min(2 * chunk + hi, b.scales, &sc, &m);
  const float d1 = __fmul_rn(dev_f16_to_f32(b.d), float(sc)), m1 = __fmul_rn(dev_f16_to_f32(b.dmin), float(m));
  const uint8_t qb = b.qs[chunk * 32 + l];
  const uint8_t u = uint8_t(1u << (2 * chunk + hi));
  const int q = (hi ? (qb >> 4) : (qb & 15)) + ((b.qh[l] & u) ? 16 : 0);
  return __fsub_rn(__fmul_rn(d1, float(q)), m1);
}

// Q6_K: element j = chunk * 128 + quarter * 32 + l.
__device__ __forceinline__ float decode_elem(const BlockQ6_K& b, int j) {
  const int chunk = j >> 7, quarter = (j >> 5) & 3, l = j & 31;
  const uint8_t* ql = b.ql + chunk * 64;
  const uint8_t* qh = b.qh + chunk * 32;
  const int8_t* sc = b.scales + chunk * 8;
  const uint8_t lb = ql[l + (quarter & 1) * 32];
  const int low = (quarter & 2) ? (lb >> 4) : (lb & 15);
  const int q = int(low | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
  const float d = dev_f16_to_f32(ld_u16(reinterpret_cast<const uint8_t*>(&b.d)));
  return __fmul_rn(__fmul_rn(d, float(sc[l / 16 + 2 * quarter])), float(q));
}

// Element j of the block at `blk` (any type with CPU kernels); false for unsupported types.
__device__ __forceinline__ float decode_elem(GgmlType type, const uint8_t* blk, int j) {
  switch (type) {
    case GgmlType::F32: return reinterpret_cast<const float*>(blk)[j];
    case GgmlType::F16: return dev_f16_to_f32(reinterpret_cast<const uint16_t*>(blk)[j]);
    case GgmlType::BF16: return dev_bf16_to_f32(reinterpret_cast<const uint16_t*>(blk)[j]);
    case GgmlType::Q4_0: return decode_elem(*reinterpret_cast<const BlockQ4_0*>(blk), j);
    case GgmlType::Q4_1: return decode_elem(*reinterpret_cast<const BlockQ4_1*>(blk), j);
    case GgmlType::Q5_0: return decode_elem(*reinterpret_cast<const BlockQ5_0*>(blk), j);
    case GgmlType::Q5_1: return decode_elem(*reinterpret_cast<const BlockQ5_1*>(blk), j);
    case GgmlType::Q8_0: return decode_elem(*reinterpret_cast<const BlockQ8_0*>(blk), j);
    case GgmlType::Q2_K: return decode_elem(*reinterpret_cast<const BlockQ2_K*>(blk), j);
    case GgmlType::Q3_K: return decode_elem(*reinterpret_cast<const BlockQ3_K*>(blk), j);
    case GgmlType::Q4_K: return decode_elem(*reinterpret_cast<const BlockQ4_K*>(blk), j);
    case GgmlType::Q5_K: return decode_elem(*reinterpret_cast<const BlockQ5_K*>(blk), j);
    case GgmlType::Q6_K: return decode_elem(*reinterpret_cast<const BlockQ6_K*>(blk), j);
    default: return __int_as_float(0x7fc00000);  // unsupported: callers validate on the host
  }
}

// Decodes one whole block of `block_size` elements (1 for the float types) into y.
__device__ __forceinline__ void decode_block(GgmlType type, const uint8_t* blk, int block_size, float* y) {
  for (int j = 0; j < block_size; ++j) y[j] = decode_elem(type, blk, j);
}

// Host side: whether decode_elem handles the type.
inline bool decodable_on_device(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0: case GgmlType::Q4_1:
    case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0: case GgmlType::Q2_K: case GgmlType::Q3_K:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace strata::kernels::cuda
