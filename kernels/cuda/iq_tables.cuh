// The i-quants' format tables on the device. Internal to kernels/cuda (CUDA only).
//
// One source of truth: the grids are expanded at compile time from the same packed data and the
// same constexpr expansion as the CPU tables (kernels/cpu/quant/iq_grids_packed.h, which names
// ggml as their source), straight into constant-initialised __device__ arrays; the IQ4 levels are
// kernels/cpu/quant/iq_grids.h's kValuesIq4nl, packed into four words at compile time.
//
// Why global memory (read through the read-only cache) and not __constant__: the lookups are data
// dependent, and the constant cache serialises a warp whose lanes read different addresses, which
// every lookup here does; the tables (1-16 KiB per type) stay resident in L1 / L2.
// `static`: each .cu that includes this gets its own copy (no relocatable device code in this
// build, so one shared definition could not be referenced from two files).
#pragma once

#include <cstdint>

#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cpu/quant/iq_grids_packed.h"

namespace strata::kernels::cuda::detail {

namespace iq_packed = strata::kernels::cpu::iq_packed;
template <typename T, size_t N>
using IqGrid = strata::kernels::cpu::GridTable<T, N>;

static __device__ const IqGrid<uint64_t, 256> kDevIq2xxsGrid = iq_packed::iq2xxs_grid();
static __device__ const IqGrid<uint64_t, 512> kDevIq2xsGrid = iq_packed::iq2xs_grid();
static __device__ const IqGrid<uint64_t, 1024> kDevIq2sGrid = iq_packed::iq2s_grid();
static __device__ const IqGrid<uint32_t, 256> kDevIq3xxsGrid = iq_packed::iq3xxs_grid();
static __device__ const IqGrid<uint32_t, 512> kDevIq3sGrid = iq_packed::iq3s_grid();
static __device__ const IqGrid<uint64_t, 2048> kDevIq1sGrid = iq_packed::iq1s_grid();

// kValuesIq4nl[4 i .. 4 i + 3] as one little-endian word (byte j = level 4 i + j).
constexpr uint32_t iq4_level_word(int i) {
  uint32_t w = 0;
  for (int j = 0; j < 4; ++j) w |= uint32_t(uint8_t(strata::kernels::cpu::kValuesIq4nl[4 * i + j])) << (8 * j);
  return w;
}
inline constexpr uint32_t kIq4Levels0 = iq4_level_word(0), kIq4Levels1 = iq4_level_word(1),
                          kIq4Levels2 = iq4_level_word(2), kIq4Levels3 = iq4_level_word(3);

// ggml's ksigns_iq2xs[i] (iq_grids.h kKsignsIq2xs): the 7 stored bits plus their parity as bit 7,
// computed (one popc) rather than looked up: it is the table's definition (iq_grids_packed.h
// make_ksigns), and a lookup would be one more data-dependent load per 8 weights.
__device__ __forceinline__ uint32_t iq_ksigns(uint32_t i7) { return i7 | ((uint32_t(__popc(i7)) & 1u) << 7); }

// Bits 0..3 of `bits` as byte masks (0xff where set).
__device__ __forceinline__ uint32_t iq_sign_mask4(uint32_t bits) { return (((bits & 15u) * 0x00204081u) & 0x01010101u) * 0xffu; }

// Four unsigned magnitudes (bytes of mag, < 128) negated where bits 0..3 of `bits` are set: signed
// int8 bytes. (m ^ 0xff) - 0xff = -m per byte (two's complement), m - 0 = m.
__device__ __forceinline__ uint32_t iq_apply_signs(uint32_t mag, uint32_t bits) {
  const uint32_t m = iq_sign_mask4(bits);
  return __vsub4(mag ^ m, m);
}

// Four 4-bit codes (low nibble of each byte of n, high nibbles zero) through kValuesIq4nl: signed
// int8 bytes. One byte permute picks from levels 0..7, one from 8..15, bit 3 of each code selects.
__device__ __forceinline__ uint32_t iq4_levels(uint32_t n) {
  const uint32_t sel = (n & 0x7u) | ((n >> 4) & 0x70u) | ((n >> 8) & 0x700u) | ((n >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(kIq4Levels0, kIq4Levels1, sel), hi = __byte_perm(kIq4Levels2, kIq4Levels3, sel);
  const uint32_t m = ((n >> 3) & 0x01010101u) * 0xffu;
  return (lo & ~m) | (hi & m);
}

// IQ1 grid bytes g (int8 in {-1, 0, 1}) as the codes 8 g + 1 (delta +1/8) or 8 g - 1 (delta -1/8),
// signed int8 bytes: with the scale dl / 8 (exact: a power of two) the value code * dl / 8 is
// dl * (g +- 1/8) rounded once, as the CPU decoder's dl * (g + delta) is.
__device__ __forceinline__ uint32_t iq1_codes(uint32_t g, bool neg_delta) {
  const uint32_t g8 = (g << 3) & 0xF8F8F8F8u;  // 8 g per byte (0xff -> 0xf8)
  return neg_delta ? __vsub4(g8, 0x01010101u) : (g8 | 0x01010101u);
}

}  // namespace strata::kernels::cuda::detail
