// Device side of the KV formats (kv/kv_quant.h is the host reference; layouts are ggml's
// block_q8_0 and block_q4_1, kernels/cpu/quant/blocks.h):
//   - decoding: a KV row is read in "units" of 8 values held in one uint4 register, so that the
//     attention kernel loads all of a tile's units before converting any (memory parallelism);
//   - encoding: one warp quantises one group of 32 values (lane = value), reproducing the host
//     quantiser bit for bit: the same f32 operations, correctly rounded (__f*_rn keeps nvcc from
//     fusing them), the same f16 rounding (__float2half_rn is round-to-nearest-even like
//     core/half.h), and the same round-half-away (roundf).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace strata::kernels::cuda::kvq {

// Formats of one KV tensor as the kernels see them.
enum Fmt : int { kF32 = 0, kF16 = 1, kQ8 = 2, kQ4 = 3 };
constexpr int kGroup = 32;
constexpr int kQ8Bytes = 34, kQ4Bytes = 20;  // bytes per group of 32

__device__ __forceinline__ float half_bits_to_float(uint32_t bits) {
  return __half2float(__ushort_as_half(uint16_t(bits & 0xffffu)));
}

// ---- decoding: units of 8 values ----------------------------------------------------------------
// Unit u of a head's slice (f16, q8, q4: head_dim / 8 units). row: the slice's first byte
// (16-byte aligned for f16, 4-byte for q4, 2-byte for q8).
//   f16: values 8u .. 8u+7.
//   q8:  group b = u / 4, values b*32 + (u%4)*8 .. +7;              raw = {d, codes 0-3, codes 4-7, -}.
//   q4:  group b = u / 4, values b*32 + (u%4)*4 .. +3 (low nibbles)
//        and b*32 + 16 + (u%4)*4 .. +3 (high nibbles);                raw = {d | m << 16, 4 code bytes, -, -}.
template <int F>
__device__ __forceinline__ uint4 fetch_unit(const uint8_t* row, int u) {
  if constexpr (F == kF16) {
    return *reinterpret_cast<const uint4*>(row + u * 16);
  } else if constexpr (F == kQ8) {
    const uint8_t* blk = row + (u >> 2) * kQ8Bytes;
    const uint16_t* h = reinterpret_cast<const uint16_t*>(blk + 2 + (u & 3) * 8);  // 2-byte aligned
    const uint32_t d = *reinterpret_cast<const uint16_t*>(blk);
    return make_uint4(d, uint32_t(h[0]) | (uint32_t(h[1]) << 16), uint32_t(h[2]) | (uint32_t(h[3]) << 16), 0u);
  } else {
    static_assert(F == kQ4);
    const uint8_t* blk = row + (u >> 2) * kQ4Bytes;
    return make_uint4(*reinterpret_cast<const uint32_t*>(blk), *reinterpret_cast<const uint32_t*>(blk + 4 + (u & 3) * 4),
                      0u, 0u);
  }
}

// Writes unit u's 8 values into dst (a row of head_dim floats, at their columns).
template <int F>
__device__ __forceinline__ void unpack_unit(const uint4& raw, int u, float* dst) {
  if constexpr (F == kF16) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      dst[u * 8 + 2 * i] = p.x;
      dst[u * 8 + 2 * i + 1] = p.y;
    }
  } else if constexpr (F == kQ8) {
    const float d = half_bits_to_float(raw.x);
    float* o = dst + (u >> 2) * kGroup + (u & 3) * 8;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[i] = float(int8_t(uint8_t(raw.y >> (8 * i)))) * d;
      o[4 + i] = float(int8_t(uint8_t(raw.z >> (8 * i)))) * d;
    }
  } else {
    const float d = half_bits_to_float(raw.x), m = half_bits_to_float(raw.x >> 16);
    float* o = dst + (u >> 2) * kGroup + (u & 3) * 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t byte = (raw.y >> (8 * i)) & 0xffu;
      o[i] = float(byte & 0xfu) * d + m;
      o[16 + i] = float(byte >> 4) * d + m;
    }
  }
}

// ---- encoding: one warp per group of 32 ---------------------------------------------------------

__device__ __forceinline__ uint16_t f16_saturate(uint16_t h) {
  if ((h & 0x7fffu) >= 0x7c00u) return (h & 0x8000u) ? uint16_t(0xfbffu) : uint16_t(0x7bffu);
  return h;
}
__device__ __forceinline__ uint16_t f16_round_up(float x) {  // smallest f16 >= x (kv/kv_quant.cpp)
  uint16_t h = f16_saturate(__half_as_ushort(__float2half_rn(x)));
  if (half_bits_to_float(h) < x && h != 0x7bffu) h = (h & 0x8000u) ? (h == 0x8000u ? uint16_t(1) : uint16_t(h - 1)) : uint16_t(h + 1);
  return h;
}
__device__ __forceinline__ uint16_t f16_round_down(float x) {  // largest f16 <= x
  uint16_t h = f16_saturate(__half_as_ushort(__float2half_rn(x)));
  if (half_bits_to_float(h) > x && h != 0xfbffu) h = (h & 0x8000u) ? uint16_t(h + 1) : (h == 0 ? uint16_t(0x8001) : uint16_t(h - 1));
  return h;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// The whole warp calls it; lane holds value `lane` of the group; blk: the group's block.
__device__ __forceinline__ void quantize_q8_group(float x, int lane, uint8_t* blk) {
  const float amax = warp_max(fabsf(x));
  const uint16_t dh = f16_round_up(__fdiv_rn(amax, 127.0f));
  const float d = half_bits_to_float(dh);
  const float id = d > 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const float q = fminf(fmaxf(roundf(__fmul_rn(x, id)), -127.0f), 127.0f);
  blk[2 + lane] = uint8_t(int8_t(q));
  if (lane == 0) *reinterpret_cast<uint16_t*>(blk) = dh;
}

__device__ __forceinline__ void quantize_q4_group(float x, int lane, uint8_t* blk) {
  const float mn = __fadd_rn(warp_min(x), 0.0f), mx = warp_max(x);  // -0 -> +0, as the host
  const uint16_t mh = f16_round_down(mn);
  const float m = half_bits_to_float(mh);
  const uint16_t dh = f16_round_up(__fdiv_rn(__fsub_rn(mx, m), 15.0f));
  const float d = half_bits_to_float(dh);
  const float id = d > 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const uint32_t q = uint32_t(fminf(fmaxf(roundf(__fmul_rn(__fsub_rn(x, m), id)), 0.0f), 15.0f));
  const uint32_t hi = __shfl_down_sync(0xffffffffu, q, 16);  // lane j < 16 pairs value j with j + 16
  if (lane < 16) blk[4 + lane] = uint8_t(q | (hi << 4));
  if (lane == 0) *reinterpret_cast<uint32_t*>(blk) = uint32_t(dh) | (uint32_t(mh) << 16);
}

}  // namespace strata::kernels::cuda::kvq
