// Device readers of the i-quants' GPU layout (kernels/gpu_layout.h "i-quants"): IQ3_XXS, IQ3_S,
// IQ4_XS (256-element chunks, the K types' lanes and slot rotation) and IQ4_NL (32-element chunks,
// as q8_0), in the gemv_gpu.cuh reader contract, so that the dp4a GEMV, the MMA GEMV and the
// dequantiser read them as they read the K types. Internal to kernels/cuda (CUDA only).
//
// Every code is a signed byte (kSigned): the grid value times its sign (IQ3) or the IQ4 level, with
// one integer scale per 32-element sub-block and an f16 factor d():
//   IQ3_XXS  value = d (0.5 + ls) 0.5 grid sign = (d / 4) (2 ls + 1) grid sign: scale 2 ls + 1, d() = d / 4
//            (exact: the two roundings differ by a power of two, gpu_layout.h);
//   IQ3_S    value = d (1 + 2 s) grid sign: scale 1 + 2 s, d() = d;
//   IQ4_XS   value = d (ls - 32) level: scale ls - 32; IQ4_NL: scale 1.
//
// Grid lookups (IQ3): from a per-CTA copy of the grid in shared memory, replicated so that lane L
// reads its own banks -- entry e of copy c at word e * kCopies + c, c = L % kCopies -- which makes
// a warp's 32 data-dependent lookups one shared-memory wavefront (IQ3_XXS: 32 copies of 256 words)
// or two at most (IQ3_S: 16 copies of 512 words; 32 would need 64 KiB per CTA). Both are 32 KiB; the
// kernels fill them once per CTA (gpu_table_fill) and then loop over row groups (persistent CTAs),
// so the fill is paid once per CTA, not per 8 rows. Why not the read-only cache or __constant__:
// a warp's lookups hit up to 8 cache lines of a 1 KiB table (up to 8 L1 wavefronts) or serialise
// on the constant cache, and without replication ~3.5 lanes share a bank on average.
//
// Signs (IQ3): per lane and 4 slots, one word whose byte i, bit b = (slot % 4) + 4 h, is the sign
// of element i of (slot, half h): the mask of half (j, h) is one shift and one byte permute in
// sign-replicate mode (sign_bytes). IQ3_S's grid values are odd, so negation is g ^ 0xFE per byte
// (-g = ~g + 1 = g ^ 0xFE for odd g); IQ3_XXS's are even: -g = 0x01010100 - g over the word (every
// byte >= 4: the borrows are exactly the per-byte ones) and a select. IQ3_XXS keeps 7 of each 8
// signs (ggml's even-parity sign patterns): the 4th sign of a half is P ^ s0 ^ s1 ^ s2, P the
// parity of the half's 4 signs (equal for both halves of an 8); one lane of the pair t, t ^ 1 that
// shares an 8 keeps P and finish() sends it to the other (one shuffle per tile).
//
// IQ4 levels: the 16 levels in two 8-byte halves, each decoded by a byte permute in the
// generic mode (a selector nibble with bit 3 set replicates the sign of byte nibble & 7): lo =
// prmt(L, n), hi = prmt(H, n ^ 8); for n < 8 hi is the sign fill of H[n] (0: H positive), for
// n >= 8 lo is the sign fill of L[n - 8]; with the codes' bits 2 and 3 swapped at repack (levels
// 0-3 and 4-7 are negative, 8-15 positive, so L[j] and the level paired with it share a sign) H is
// stored xor that fill and lo ^ hi is the level. Three operations per 4 codes.
#pragma once

#include <type_traits>

#include "kernels/cpu/quant/iq_grids.h"
#include "kernels/cuda/gemv_gpu.cuh"
#include "kernels/cuda/iq_tables.cuh"

namespace strata::kernels::cuda::detail {

// prmt.b32 in its generic mode (sign replication where a selector nibble has bit 3 set; the CUDA
// intrinsic __byte_perm documents only the 3-bit selection).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
// 0xff in every byte whose bit 7 is set, else 0.
__device__ __forceinline__ uint32_t sign_bytes(uint32_t x) { return prmt(x, 0u, 0xBA98u); }

// ---- IQ4 levels (kValuesIq4nl) ----
// V[n] = the level of layout code n (bits 2, 3 of the GGUF code swapped); L[j] = V[j],
// H[j] = V[8 + j] ^ (sign fill of V[j]).
constexpr int iq4_level_of_layout_code(int n) {
  const int c = (n & 3) | ((n >> 1) & 4) | ((n << 1) & 8);
  return strata::kernels::cpu::kValuesIq4nl[c];
}
constexpr uint32_t iq4_prmt_word(bool high, int k) {  // bytes 4 k .. 4 k + 3 of L (high = false) or H
  uint32_t w = 0;
  for (int b = 0; b < 4; ++b) {
    const int j = 4 * k + b;
    const int lo = iq4_level_of_layout_code(j);
    const int v = high ? (iq4_level_of_layout_code(8 + j) ^ (lo < 0 ? 0xff : 0)) : lo;
    w |= uint32_t(uint8_t(v)) << (8 * b);
  }
  return w;
}
inline constexpr uint32_t kIq4L0 = iq4_prmt_word(false, 0), kIq4L1 = iq4_prmt_word(false, 1),
                          kIq4H0 = iq4_prmt_word(true, 0), kIq4H1 = iq4_prmt_word(true, 1);
// The pairing needs V[j] and V[8 + j] to share a sign, and H to be non-negative (its fill is 0).
constexpr bool iq4_pairs_ok() {
  for (int j = 0; j < 8; ++j) {
    if ((iq4_level_of_layout_code(j) < 0) != (iq4_level_of_layout_code(8 + j) < 0)) return false;
    if (((iq4_prmt_word(true, j / 4) >> (8 * (j % 4))) & 0x80u) != 0) return false;
  }
  return true;
}
static_assert(iq4_pairs_ok());

// The 4 levels of the layout codes in nibbles 0..3 of n (nibbles 4..7 ignored).
__device__ __forceinline__ uint32_t iq4_decode4(uint32_t n) {
  return prmt(kIq4L0, kIq4L1, n) ^ prmt(kIq4H0, kIq4H1, n ^ 0x8888u);
}

// ---- IQ3 shared pieces ----
// Sign mask of (slot j, half h) from the lane's sign words (w[j / 4], bit (j % 4) + 4 h of each byte).
__device__ __forceinline__ uint32_t iq3_sign_mask(uint2 sg, int j, int h) {
  const uint32_t w = j < 4 ? sg.x : sg.y;
  return sign_bytes(w << (7 - ((j & 3) + 4 * h)));
}
// Slot j -> j ^ 2 inside a sign word: bits b <-> b ^ 2 of every byte.
__device__ __forceinline__ uint32_t iq3_swap_sign_pairs(uint32_t w) {
  return ((w & 0x33333333u) << 2) | ((w >> 2) & 0x33333333u);
}
__device__ __forceinline__ void iq3_unrotate_signs(uint2& sg, int t) {
  if (t & 1) sg = make_uint2(iq3_swap_sign_pairs(sg.x), iq3_swap_sign_pairs(sg.y));
  swap_if(t & 2, sg.x, sg.y);
}
// Byte 2 j + h of the lane's 16 index bytes.
__device__ __forceinline__ uint32_t iq3_index_byte(const uint4& q, int j, int h) {
  return (word_of(q, j >> 1) >> (16 * (j & 1) + 8 * h)) & 0xffu;
}
// Word at a byte offset of the CTA's table.
__device__ __forceinline__ uint32_t table_word(const uint32_t* tab, uint32_t byte_off) {
  return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(tab) + byte_off);
}
// Fills the CTA's replicated table (all threads; the caller synchronises).
template <int kEntries, int kCopies>
__device__ __forceinline__ void fill_replicated(uint32_t* tab, const uint32_t* grid) {
  constexpr int kQuads = kCopies / 4;
  for (int i = threadIdx.x; i < kEntries * kQuads; i += blockDim.x) {
    const uint32_t v = __ldg(grid + i / kQuads);
    reinterpret_cast<uint4*>(tab)[i] = make_uint4(v, v, v, v);
  }
}

// IQ3_XXS (784 B): idx[32][16] (byte 2 j + h: grid index of the lane's 4 elements of slot j, half h),
// sg[32][8] (two sign words; byte 3 of the first: the kept parities, of the second: the scale codes
// of sub-blocks 2t, 2t + 1), d[8][2].
struct GpuIq3XXS {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 784, kBias = 0;
  static constexpr bool kMin = false, kScale16 = false, kSigned = true, kLaneScales = false, kIq = true;
  static constexpr int kEntries = 256, kCopies = 32, kTableWords = kEntries * kCopies;
  uint4 q;
  uint2 sg;
  uint32_t scb = 0, scall = 0, lane_off = 0;
  uint16_t dd;
  __device__ __forceinline__ static uint32_t* table() {
    __shared__ __align__(16) uint32_t tab[kTableWords];
    return tab;
  }
  __device__ __forceinline__ static void fill_table() { fill_replicated<kEntries, kCopies>(table(), kDevIq3xxsGrid.v); }
  template <class P = const uint8_t*>
  __device__ __forceinline__ void load_raw(P tile, int lane, int g) {
    q = ld_u4(tile + lane * 16);
    sg = ld_u2(tile + 512 + lane * 8);
    dd = ld16(tile + 768 + g * 2);
  }
  // The parities: this lane keeps P of its halves h = t % 2 (byte 3 of sg.x: word 0's at nibble
  // t % 2, word 1's at the other, bit slot % 4), lane t ^ 1 those of the other half (its slot j ^ 2).
  // Every lane of the warp runs it (a shuffle).
  __device__ __forceinline__ void finish() {
    const int t = threadIdx.x & 3;
    const uint32_t own = sg.x >> 24;
    scb = sg.y >> 24;
    uint32_t other = __shfl_xor_sync(0xffffffffu, own, 1);
    other = ((other & 0x33u) << 2) | ((other >> 2) & 0x33u);
    const uint32_t m = 0x0Fu << (4 * (t & 1));
    const uint32_t p0 = (own & m) | (other & ~m & 0xffu);
    const uint32_t p1 = (own & ~m & 0xffu) | (other & m);
    const uint32_t p = p0 | (((p1 >> 4) | (p1 << 4)) & 0xffu) << 8;
    // Byte 3 of each sign word := P ^ byte 0 ^ byte 1 ^ byte 2 (the 4th signs).
    const uint32_t x0 = __byte_perm(sg.x, sg.y, 0x5140), x1 = __byte_perm(sg.x, sg.y, 0x6262);
    const uint32_t z = x0 ^ (x0 >> 16) ^ x1 ^ p;
    sg = make_uint2(__byte_perm(sg.x, z, 0x4210), __byte_perm(sg.y, z, 0x5210));
    lane_off = (threadIdx.x & 31) * 4;
  }
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    load_raw(tile, lane, g);
    finish();
  }
  // Slot order -> sub-block order; gathers the row's 8 scale codes (two shuffles: every lane runs it).
  __device__ __forceinline__ void unrotate(int t) {
    xor_words(q, t);
    iq3_unrotate_signs(sg, t);
    uint32_t v = scb << (8 * t);
    v |= __shfl_xor_sync(0xffffffffu, v, 1);
    scall = v | __shfl_xor_sync(0xffffffffu, v, 2);
  }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const uint32_t g4 = table_word(table(), (iq3_index_byte(q, s, h) << 7) | lane_off);
    const uint32_t m = iq3_sign_mask(sg, s, h);
    return (g4 & ~m) | ((0x01010100u - g4) & m);
  }
  __device__ __forceinline__ void own_scales(int, int& s0, int& s1) const {
    s0 = int(2 * (scb & 15u) + 1), s1 = int(2 * (scb >> 4) + 1);
  }
  __device__ __forceinline__ int scale(int s, int) const { return int(2 * ((scall >> (4 * s)) & 15u) + 1); }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return __fmul_rn(h2f(dd), 0.25f); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

// IQ3_S (880 B): idx[32][16] (low 8 bits of the grid indices, as IQ3_XXS), sg[32][8] (two sign
// words, all 4 signs), qh[32][2] (bit 2 j + h: the 9th index bit), sc[8][4] (the GGUF scale
// nibbles, sub-block s at nibble s), d[8][2].
struct GpuIq3S {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 880, kBias = 0;
  static constexpr bool kMin = false, kScale16 = false, kSigned = true, kLaneScales = false, kIq = true;
  static constexpr int kEntries = 512, kCopies = 16, kTableWords = kEntries * kCopies;
  uint4 q;
  uint2 sg;
  uint32_t hb, sc, lane_off = 0;
  uint16_t dd;
  __device__ __forceinline__ static uint32_t* table() {
    __shared__ __align__(16) uint32_t tab[kTableWords];
    return tab;
  }
  __device__ __forceinline__ static void fill_table() { fill_replicated<kEntries, kCopies>(table(), kDevIq3sGrid.v); }
  template <class P = const uint8_t*>
  __device__ __forceinline__ void load_raw(P tile, int lane, int g) {
    q = ld_u4(tile + lane * 16);
    sg = ld_u2(tile + 512 + lane * 8);
    hb = ld16(tile + 768 + lane * 2);
    sc = ld_u1(tile + 832 + g * 4);
    dd = ld16(tile + 864 + g * 2);
  }
  __device__ __forceinline__ void finish() { lane_off = (threadIdx.x & 15) * 4; }
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    load_raw(tile, lane, g);
    finish();
  }
  __device__ __forceinline__ void unrotate(int t) {
    xor_words(q, t);
    iq3_unrotate_signs(sg, t);
    if (t & 1) hb = ((hb << 4) & 0xF0F0u) | ((hb >> 4) & 0x0F0Fu);  // bit 2 j + h -> 2 (j ^ 2) + h
    if (t & 2) hb = ((hb << 8) | (hb >> 8)) & 0xFFFFu;               // -> 2 (j ^ 4) + h
  }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const int k = 2 * s + h;
    const uint32_t idx = iq3_index_byte(q, s, h) | (((hb >> k) & 1u) << 8);
    const uint32_t g4 = table_word(table(), (idx << 6) | lane_off);
    return g4 ^ (iq3_sign_mask(sg, s, h) & 0xFEFEFEFEu);
  }
  __device__ __forceinline__ void own_scales(int t, int& s0, int& s1) const {
    const uint32_t b = sc >> (8 * t);
    s0 = int(1 + 2 * (b & 15u)), s1 = int(1 + 2 * ((b >> 4) & 15u));
  }
  __device__ __forceinline__ int scale(int s, int) const { return int(1 + 2 * ((sc >> (4 * s)) & 15u)); }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

// IQ4_XS (1088 B): qs[32][32] (word j: nibble i = layout code of E(j ^ 2t, 0, i), nibble 4 + i of
// half 1), then per row 8 bytes: f16 d, 16 bits H (nibble k: high 2 bits of ls k, of ls k + 4 above),
// 4 bytes (byte k: low 4 bits of ls k, of ls k + 4 above).
struct GpuIq4XS {
  static constexpr int kChunk = 256, kSubs = 8, kTile = 1088, kBias = 0;
  static constexpr bool kMin = false, kScale16 = false, kSigned = true, kLaneScales = false, kIq = true;
  uint4 qa, qb;
  uint2 hdr, sc;  // sc: the scales ls - 32 as signed bytes, sub-blocks 0-3 in x, 4-7 in y
  __device__ __forceinline__ void load_raw(const uint8_t* tile, int lane, int g) {
    qa = ld_u4(tile + lane * 32);
    qb = ld_u4(tile + lane * 32 + 16);
    hdr = ld_u2(tile + 1024 + g * 8);
  }
  __device__ __forceinline__ void finish() {
    const uint32_t b = __byte_perm(hdr.x, 0u, 0x3322);  // bytes H.0, H.0, H.1, H.1
    const uint32_t hi = (b & 0x000F000Fu) | ((b >> 4) & 0x0F000F00u);  // byte k = nibble k of H
    sc = make_uint2(minus32((hdr.y & 0x0F0F0F0Fu) | ((hi & 0x03030303u) << 4)),
                    minus32(((hdr.y >> 4) & 0x0F0F0F0Fu) | ((hi & 0x0C0C0C0Cu) << 2)));
  }
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    load_raw(tile, lane, g);
    finish();
  }
  __device__ __forceinline__ void unrotate(int t) { xor_slot_words(qa, qb, t); }
  __device__ __forceinline__ uint32_t codes(int s, int h) const {
    const uint32_t w = s < 4 ? word_of(qa, s) : word_of(qb, s - 4);
    return iq4_decode4(h ? w >> 16 : w);
  }
  __device__ __forceinline__ void own_scales(int t, int& s0, int& s1) const {
    const uint32_t v = __byte_perm(sc.x, sc.y, uint32_t(2 * t) | (uint32_t(2 * t + 1) << 4));
    s0 = int(int8_t(v & 0xffu)), s1 = int(int8_t((v >> 8) & 0xffu));
  }
  __device__ __forceinline__ int scale(int s, int) const { return int(int8_t((s < 4 ? sc.x : sc.y) >> (8 * (s & 3)))); }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(uint16_t(hdr.x)); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

// IQ4_NL (144 B, 32-element chunks as q8_0): qs[32][4] (nibble i: layout code of E(0, 0, i), 4 + i
// of half 1), d[8][2].
struct GpuIq4NL {
  static constexpr int kChunk = 32, kSubs = 1, kTile = 144, kBias = 0;
  static constexpr bool kMin = false, kScale16 = false, kSigned = true, kLaneScales = false;
  uint32_t q;
  uint16_t dd;
  __device__ __forceinline__ void load_raw(const uint8_t* tile, int lane, int g) { load(tile, lane, g); }
  __device__ __forceinline__ void finish() {}
  __device__ __forceinline__ void load(const uint8_t* tile, int lane, int g) {
    q = ld_u1(tile + lane * 4);
    dd = ld16(tile + 128 + g * 2);
  }
  __device__ __forceinline__ void unrotate(int) {}
  __device__ __forceinline__ uint32_t codes(int, int h) const { return iq4_decode4(h ? q >> 16 : q); }
  __device__ __forceinline__ int scale(int, int) const { return 1; }
  __device__ __forceinline__ int min(int) const { return 0; }
  __device__ __forceinline__ float d() const { return h2f(dd); }
  __device__ __forceinline__ float dmin() const { return 0.0f; }
};

}  // namespace strata::kernels::cuda::detail
