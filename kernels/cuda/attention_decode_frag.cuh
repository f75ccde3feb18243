// Tensor-core pieces of the flash-decoding kernel (attention_decode.cu): the mma wrappers and the
// readers that turn a key's head slice in shared memory (raw f16 / Q8_0 / Q4_1 bytes,
// kv_quant.cuh) into mma fragments. sm_80+ instructions only (mma.sync m16n8k16 f16 and m16n8k8
// tf32, cvt.rna.tf32), so sm_86 / sm_89 build the same code.
//
// Exactness: every KV value enters an mma exactly. Q8_0 codes (-127..127), Q4_1 nibbles (0..15)
// and f16 values are exact in f16 and in tf32; the block scale d (and Q4_1's offset m) is applied
// outside the mma in f32. The f32 operands that are not exact in the narrow format (the query for
// Q.K^T, the probabilities times d for P.V) are split in two, x = hi + lo, and both halves go
// through the mma: ~22 bits of each, about f32's accuracy (attention_decode.cu has the bound).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/kv_quant.cuh"

namespace strata::kernels::cuda::dec {

// c += a b: a 16x16 f16 (row), b 16x8 f16 (col), f32 accumulate.
__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// c += a b: a 16x8 tf32 (row), b 8x8 tf32 (col), f32 accumulate.
__device__ __forceinline__ void mma_tf32(float (&c)[4], float a0, float a1, float a2, float a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(a2)), "r"(__float_as_uint(a3)),
        "r"(b0), "r"(b1));
}

// x = hi + lo, both tf32 (round to nearest, ties away): |x - hi - lo| <= 2^-22 |x| (x - hi is exact).
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(hi) : "f"(x));
  const float r = __fsub_rn(x, __uint_as_float(hi));
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(lo) : "f"(r));
}
// (x0, x1) = hi + lo, both f16 pairs (low half x0).
__device__ __forceinline__ void split_f16x2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __half2 h = __floats2half2_rn(x0, x1);
  const float2 hf = __half22float2(h);
  const __half2 l = __floats2half2_rn(__fsub_rn(x0, hf.x), __fsub_rn(x1, hf.y));
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

__device__ __forceinline__ uint32_t lds_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t lds_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Bytes e0 and e1 of x (values 0..255) as an f16 pair 1024 + x_e (0x64 is 1024's high byte).
__device__ __forceinline__ uint32_t bytes_to_h2(uint32_t x, unsigned sel) { return __byte_perm(x, 0x64646464u, sel); }
__device__ __forceinline__ uint32_t h2_sub(uint32_t a, __half2 b) {
  const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&a), b);
  return *reinterpret_cast<const uint32_t*>(&r);
}
// Byte e of x as the float 2^23 + x_e (x_e placed under 2^23's exponent; no I2F, a quarter-rate op).
__device__ __forceinline__ float byte_magic(uint32_t x, int e) {
  return __uint_as_float(__byte_perm(x, 0x4B000000u, 0x7540u + unsigned(e)));
}

// Q.K^T operand: dimensions 32 b + 8 t .. + 7 of a key (s: its head slice in shared memory) as four
// exact f16 pairs (dims 8t + 2i, 8t + 2i + 1 in h[i]), with the block's d and m (f16 K: 1, 0).
template <int F>
__device__ __forceinline__ void k_frag(int fmt, const uint8_t* s, int b, int t, uint32_t (&h)[4], float& d, float& m) {
  const int f = F >= 0 ? F : fmt;
  if (f == kvq::kF16) {
    const uint4 w = *reinterpret_cast<const uint4*>(s + b * 64 + t * 16);
    h[0] = w.x, h[1] = w.y, h[2] = w.z, h[3] = w.w;
    d = 1.0f, m = 0.0f;
  } else if (f == kvq::kQ8) {
    // Block: f16 d, 32 int8 codes (2-byte aligned). Codes ^ 0x80 are code + 128 as bytes.
    const uint8_t* blk = s + b * kvq::kQ8Bytes;
    d = kvq::half_bits_to_float(lds_u16(blk));
    m = 0.0f;
    const __half2 bias = __floats2half2_rn(1152.0f, 1152.0f);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = h2_sub(bytes_to_h2(lds_u16(blk + 2 + 8 * t + 2 * i) ^ 0x8080u, 0x4140u), bias);
  } else {
    // Block: f16 d, f16 m, 16 code bytes (value i: low nibble of byte i, 16 + i: its high nibble).
    const uint8_t* blk = s + b * kvq::kQ4Bytes;
    const uint32_t dm = lds_u32(blk);
    d = kvq::half_bits_to_float(dm), m = kvq::half_bits_to_float(dm >> 16);
    const uint8_t* c = blk + 4 + 8 * (t & 1);
    const unsigned sh = unsigned(t >> 1) * 4u;
    const uint32_t n0 = (lds_u32(c) >> sh) & 0x0F0F0F0Fu, n1 = (lds_u32(c + 4) >> sh) & 0x0F0F0F0Fu;
    const __half2 bias = __floats2half2_rn(1024.0f, 1024.0f);
    h[0] = h2_sub(bytes_to_h2(n0, 0x4140u), bias);
    h[1] = h2_sub(bytes_to_h2(n0, 0x4342u), bias);
    h[2] = h2_sub(bytes_to_h2(n1, 0x4140u), bias);
    h[3] = h2_sub(bytes_to_h2(n1, 0x4342u), bias);
  }
}

// P.V operand: dimensions 32 b + 4 g .. + 3 of a key as exact floats (f16 values or integer
// codes), with the block's d (f16 V: 1). Q4_1's offset m is read apart (v_offset).
template <int F>
__device__ __forceinline__ void v_frag(int fmt, const uint8_t* s, int b, int g, float (&x)[4], float& d) {
  const int f = F >= 0 ? F : fmt;
  if (f == kvq::kF16) {
    const uint2 w = *reinterpret_cast<const uint2*>(s + b * 64 + g * 8);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&w.x));
    const float2 c = __half22float2(*reinterpret_cast<const __half2*>(&w.y));
    x[0] = a.x, x[1] = a.y, x[2] = c.x, x[3] = c.y;
    d = 1.0f;
  } else if (f == kvq::kQ8) {
    const uint8_t* blk = s + b * kvq::kQ8Bytes;
    d = kvq::half_bits_to_float(lds_u16(blk));
    const uint32_t lo = lds_u16(blk + 2 + 4 * g) ^ 0x8080u, hi = lds_u16(blk + 4 + 4 * g) ^ 0x8080u;
    x[0] = __fsub_rn(byte_magic(lo, 0), 8388736.0f);  // 2^23 + 128
    x[1] = __fsub_rn(byte_magic(lo, 1), 8388736.0f);
    x[2] = __fsub_rn(byte_magic(hi, 0), 8388736.0f);
    x[3] = __fsub_rn(byte_magic(hi, 1), 8388736.0f);
  } else {
    const uint8_t* blk = s + b * kvq::kQ4Bytes;
    d = kvq::half_bits_to_float(lds_u16(blk));
    const uint32_t n = (lds_u32(blk + 4 + 4 * (g & 3)) >> (unsigned(g >> 2) * 4u)) & 0x0F0F0F0Fu;
#pragma unroll
    for (int e = 0; e < 4; ++e) x[e] = __fsub_rn(byte_magic(n, e), 8388608.0f);
  }
}
// Q4_1's offset m of block b of a key's V slice (0 for the other formats).
__device__ __forceinline__ float v_offset(int fmt, const uint8_t* s, int b) {
  return fmt == kvq::kQ4 ? kvq::half_bits_to_float(lds_u16(s + b * kvq::kQ4Bytes + 2)) : 0.0f;
}

}  // namespace strata::kernels::cuda::dec
