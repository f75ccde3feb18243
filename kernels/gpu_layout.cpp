// Host repack into the GPU layout and its exact decode (layout: gpu_layout.h). Each GGUF super-block
// (or q8_0 block) is first unpacked to plain integers (codes per element, scales, mins, raw f16
// d / dmin: the format facts of kernels/cpu/quant/blocks.h), then written into its tile; the decode
// reads the tile back into the same integers and evaluates the CPU decoders' float expressions in
// their order (no FMA: this file gets no -mfma and C++20 without extensions does not contract).
#include "kernels/gpu_layout.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>

#include "core/half.h"
#include "core/status.h"
#include "kernels/cpu/quant/blocks.h"
#include "kernels/cpu/quant/iq_grids.h"

namespace strata::kernels {
namespace {

using namespace cpu;

// One chunk of one row as integers.
struct Unpacked {
  uint8_t code[256];  // unsigned codes (q8_0: the int8 bits)
  int8_t sc[16];      // q4_K/q5_K: 8 scales (0..63); q3_K: 16 scales - 32; q6_K: 16 scales
  uint8_t mn[8];      // q4_K/q5_K mins
  uint8_t packed[12]; // q3_K, q4_K, q5_K: the GGUF block's 12 packed 6-bit scale (and min) bytes
  uint16_t d = 0, dmin = 0;
};

// sc / mn from the packed GGUF scale bytes (q3_K, q4_K, q5_K).
void unpack_scales(GgmlType t, Unpacked& u) {
  if (t == GgmlType::Q3_K) {
    for (int j = 0; j < 16; ++j) u.sc[j] = int8_t(cpu::q3_scale_code(j, u.packed) - 32);
    return;
  }
  for (int j = 0; j < 8; ++j) {
    int s, m;
    cpu::k4_scale_min(j, u.packed, &s, &m);
    u.sc[j] = int8_t(s);
    u.mn[j] = uint8_t(m);
  }
}

struct TypeLayout {
  int chunk = 0, tile = 0;
  // Stream offsets inside a tile (bytes).
  int qs = 0, qh = 0, sc = 0, d = 0;
};

TypeLayout type_layout(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: return {256, 1152, 0, -1, 1024, 1120};
    case GgmlType::Q5_K: return {256, 1408, 0, 1024, 1280, 1376};
    case GgmlType::Q3_K: return {256, 880, 0, 512, 768, 864};
    case GgmlType::Q6_K: return {256, 1680, 0, 1024, 1536, 1664};
    case GgmlType::Q8_0: return {32, 272, 0, -1, -1, 256};
    // i-quants (gpu_layout.h): qs = grid indices (IQ3) or codes (IQ4), qh = the IQ3 sign words,
    // sc = the per-row scales (IQ3_S; IQ4_XS with d), d = f16 d. IQ3_S's high index bits lie at 768.
    case GgmlType::IQ3_XXS: return {256, 784, 0, 512, -1, 768};
    case GgmlType::IQ3_S: return {256, 880, 0, 512, 832, 864};
    case GgmlType::IQ4_XS: return {256, 1088, 0, -1, 1024, 1024};
    case GgmlType::IQ4_NL: return {32, 144, 0, -1, -1, 128};
    default: return {};
  }
}

// GGUF block(s) of chunk c of a row -> integers.
void unpack(GgmlType t, const uint8_t* row, int64_t c, Unpacked& u) {
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const bool q5 = t == GgmlType::Q5_K;
      const uint8_t* b = row + c * (q5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K));
      std::memcpy(&u.d, b, 2);
      std::memcpy(&u.dmin, b + 2, 2);
      std::memcpy(u.packed, b + 4, 12);
      unpack_scales(t, u);
      const uint8_t* qs = b + (q5 ? 48 : 16);
      // Element e = 64 g + 32 hi + l (loops with fixed shifts inside, so that they vectorise).
      for (int g = 0; g < 4; ++g)
        for (int hi = 0; hi < 2; ++hi) {
          uint8_t* c = u.code + 64 * g + 32 * hi;
          for (int l = 0; l < 32; ++l) c[l] = uint8_t((qs[32 * g + l] >> (4 * hi)) & 15);
          if (q5)
            for (int l = 0; l < 32; ++l) c[l] = uint8_t(c[l] | (((b[16 + l] >> (2 * g + hi)) & 1) << 4));
        }
      return;
    }
    case GgmlType::Q3_K: {
      const uint8_t* b = row + c * sizeof(BlockQ3_K);
      const uint8_t* hmask = b;
      const uint8_t* qs = b + 32;
      const uint8_t* scales = b + 96;
      std::memcpy(&u.d, b + 108, 2);
      std::memcpy(u.packed, scales, 12);
      unpack_scales(t, u);
      // Element e = 128 half + 32 s + 16 part + l.
      for (int half = 0; half < 2; ++half)
        for (int s = 0; s < 4; ++s)
          for (int part = 0; part < 2; ++part) {
            uint8_t* c = u.code + 128 * half + 32 * s + 16 * part;
            const uint8_t* q = qs + 32 * half + 16 * part;
            const uint8_t* hm = hmask + 16 * part;
            // Eight elements per 64-bit word (the shifts stay inside each byte's bits).
            for (int k = 0; k < 2; ++k) {
              uint64_t qw, hw;
              std::memcpy(&qw, q + 8 * k, 8);
              std::memcpy(&hw, hm + 8 * k, 8);
              const uint64_t code = ((qw >> (2 * s)) & 0x0303030303030303ull) |
                                    (((hw >> (4 * half + s)) & 0x0101010101010101ull) << 2);
              std::memcpy(c + 8 * k, &code, 8);
            }
          }
      return;
    }
    case GgmlType::Q6_K: {
      const uint8_t* b = row + c * sizeof(BlockQ6_K);
      std::memcpy(&u.d, b + 208, 2);
      for (int j = 0; j < 16; ++j) u.sc[j] = int8_t(b[192 + j]);
      // Element e = 128 ch + 32 k + l.
      for (int ch = 0; ch < 2; ++ch)
        for (int k = 0; k < 4; ++k) {
          uint8_t* c = u.code + 128 * ch + 32 * k;
          const uint8_t* lo = b + 64 * ch + 32 * (k & 1);
          const uint8_t* hi = b + 128 + 32 * ch;
          for (int l = 0; l < 32; ++l)
            c[l] = uint8_t(((lo[l] >> (4 * (k >> 1))) & 15) | (((hi[l] >> (2 * k)) & 3) << 4));
        }
      return;
    }
    case GgmlType::Q8_0: {
      const uint8_t* b = row + c * sizeof(BlockQ8_0);
      std::memcpy(&u.d, b, 2);
      std::memcpy(u.code, b + 2, 32);
      return;
    }
    default: STRATA_CHECK(false, "gpu layout: type not repacked");
  }
}

// q3_K: where the low 2 bits and the hmask bit of a lane's code for slot j, half h lie (words
// W0..W5, bit of byte i; gpu_layout.h "q3_K").
struct Q3Place {
  int word_low, bit_low, word_high, bit_high;
};
inline Q3Place q3_place(int j, int h) {
  const int m = j / 2, kind = 2 * (j % 2) + h;
  switch (kind) {
    case 0: return {m, 0, m, 2};
    case 1: return {m, 3, m, 5};
    case 2: return {4 + m / 2, 3 * (m % 2), 4 + m / 2, 3 * (m % 2) + 2};
    default: return {m, 6, 4 + m / 2, 6 + m % 2};
  }
}

// Element of lane t in sub-block s, half h, byte i (gpu_layout.h: E(s, h, i)).
int elem(int s, int h, int t, int i) { return 32 * s + 16 * h + 4 * t + i; }

void scales_io(GgmlType t, uint8_t* tile, int g, Unpacked& u, bool write);

// Reads row g's share of a tile into u, a bit at a time by the layout's rules (gpu_layout.h): the
// reference that tile_write (below) is checked against, through dequantize_gpu_layout_row.
void tile_read(GgmlType t, uint8_t* tile, int g, Unpacked& u) {
  const TypeLayout L = type_layout(t);
  const int subs = L.chunk / 32;
  auto bits = [&](const uint8_t* byte, int bit, int nbits, int elem_idx, int code_shift) {
    u.code[elem_idx] = uint8_t(u.code[elem_idx] | (((*byte >> bit) & ((1 << nbits) - 1)) << code_shift));
  };
  std::memset(u.code, 0, sizeof(u.code));
  for (int tt = 0; tt < 4; ++tt) {
    const int lane = 4 * g + tt;
    for (int s = 0; s < subs; ++s)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i) {
          // s is the lane's slot; it holds sub-block s ^ 2 tt (gpu_layout.h: "Slots").
          const int e = elem(subs == 8 ? s ^ (2 * tt) : s, h, tt, i);
          switch (t) {
            case GgmlType::Q8_0: u.code[e] = tile[L.qs + lane * 8 + 4 * h + i]; break;
            case GgmlType::Q4_K:
            case GgmlType::Q5_K:
            case GgmlType::Q6_K: {
              bits(tile + L.qs + lane * 32 + 4 * s + i, 4 * h, 4, e, 0);
              if (t == GgmlType::Q5_K) bits(tile + L.qh + lane * 8 + s, 4 * h + i, 1, e, 4);
              if (t == GgmlType::Q6_K) bits(tile + L.qh + lane * 16 + 4 * (s / 2) + i, 4 * (s % 2) + 2 * h, 2, e, 4);
              break;
            }
            case GgmlType::Q3_K: {
              // Byte i of the lane's word n: W0..W3 in the first stream, W4, W5 in the second.
              auto word_byte = [&](int n) {
                return n < 4 ? tile + L.qs + lane * 16 + 4 * n + i : tile + L.qh + lane * 8 + 4 * (n - 4) + i;
              };
              const Q3Place p = q3_place(s, h);
              bits(word_byte(p.word_low), p.bit_low, 2, e, 0);
              bits(word_byte(p.word_high), p.bit_high, 1, e, 2);
              break;
            }
            default: break;
          }
        }
  }
  scales_io(t, tile, g, u, false);
}

// The per-row scale and factor streams of row g's share of a tile, written or read.
void scales_io(GgmlType t, uint8_t* tile, int g, Unpacked& u, bool write) {
  const TypeLayout L = type_layout(t);
  auto io = [&](uint8_t* p, void* v, size_t n) {
    if (write) std::memcpy(p, v, n);
    else std::memcpy(v, p, n);
  };
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      io(tile + L.sc + 12 * g, u.packed, 12);
      io(tile + L.d + 4 * g, &u.d, 2);
      io(tile + L.d + 4 * g + 2, &u.dmin, 2);
      if (!write) unpack_scales(t, u);
      break;
    case GgmlType::Q3_K:
      io(tile + L.sc + 12 * g, u.packed, 12);
      io(tile + L.d + 2 * g, &u.d, 2);
      if (!write) unpack_scales(t, u);
      break;
    case GgmlType::Q6_K:
      io(tile + L.sc + 16 * g, u.sc, 16);
      io(tile + L.d + 2 * g, &u.d, 2);
      break;
    case GgmlType::Q8_0: io(tile + L.d + 2 * g, &u.d, 2); break;
    default: break;
  }
}

// The CPU decoders' expressions (kernels/cpu/quant/*_types.cpp), on the integers.
void decode(GgmlType t, const Unpacked& u, int chunk, float* y) {
  const float d = f16_to_f32(u.d);
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      const float dmin = f16_to_f32(u.dmin);
      for (int e = 0; e < 256; ++e) {
        const float dl = d * float(u.sc[e / 32]), ml = dmin * float(u.mn[e / 32]);
        y[e] = dl * float(u.code[e]) - ml;
      }
      return;
    }
    case GgmlType::Q3_K:
      for (int e = 0; e < 256; ++e) y[e] = (d * float(u.sc[e / 16])) * float(int(u.code[e]) - 4);
      return;
    case GgmlType::Q6_K:
      for (int e = 0; e < 256; ++e) y[e] = d * float(u.sc[e / 16]) * float(int(u.code[e]) - 32);
      return;
    case GgmlType::Q8_0:
      for (int e = 0; e < chunk; ++e) y[e] = float(int8_t(u.code[e])) * d;
      return;
    default: return;
  }
}


// ---- i-quants (gpu_layout.h "i-quants") ----

bool is_iq(GgmlType t) {
  return t == GgmlType::IQ3_XXS || t == GgmlType::IQ3_S || t == GgmlType::IQ4_XS || t == GgmlType::IQ4_NL;
}

// One chunk of one row of an i-quant as integers: grid indices per 4 elements (IQ3), a sign bit per
// element (IQ3: the full pattern, IQ3_XXS's parity bits included), 4-bit codes (IQ4), scale codes.
struct IqUnpacked {
  uint16_t grid[64];  // 4-element group q of the chunk (elements 4 q .. 4 q + 3)
  uint8_t sign[256];
  uint8_t code[256];
  uint8_t ls[8];      // IQ3_XXS / IQ3_S: 4-bit scale code; IQ4_XS: 6-bit ls
  uint16_t d = 0;
};

// IQ4 codes in the layout: bits 2 and 3 swapped (gpu_layout.h: the levels then pair up so that two
// byte permutes and one xor decode them). The swap is its own inverse.
uint8_t iq4_perm(uint8_t c) { return uint8_t((c & 3) | ((c >> 1) & 4) | ((c << 1) & 8)); }

void iq_unpack(GgmlType t, const uint8_t* row, int64_t c, IqUnpacked& u) {
  switch (t) {
    case GgmlType::IQ3_XXS: {
      const uint8_t* b = row + c * sizeof(BlockIQ3_XXS);
      std::memcpy(&u.d, b, 2);
      for (int ib = 0; ib < 8; ++ib) {
        uint32_t meta;
        std::memcpy(&meta, b + 2 + 64 + 4 * ib, 4);
        u.ls[ib] = uint8_t(meta >> 28);
        for (int q = 0; q < 8; ++q) u.grid[8 * ib + q] = b[2 + 8 * ib + q];
        for (int l = 0; l < 4; ++l) {
          const unsigned s = kKsignsIq2xs.v[(meta >> (7 * l)) & 127];
          for (int k = 0; k < 8; ++k) u.sign[32 * ib + 8 * l + k] = uint8_t((s >> k) & 1);
        }
      }
      return;
    }
    case GgmlType::IQ3_S: {
      const auto* b = reinterpret_cast<const BlockIQ3_S*>(row + c * sizeof(BlockIQ3_S));
      std::memcpy(&u.d, &b->d, 2);
      for (int ib = 0; ib < 8; ++ib) {
        u.ls[ib] = uint8_t((b->scales[ib / 2] >> (4 * (ib % 2))) & 15);
        for (int q = 0; q < 8; ++q) u.grid[8 * ib + q] = uint16_t(b->qs[8 * ib + q] | (((b->qh[ib] >> q) & 1u) << 8));
        for (int l = 0; l < 4; ++l)
          for (int k = 0; k < 8; ++k) u.sign[32 * ib + 8 * l + k] = uint8_t((b->signs[4 * ib + l] >> k) & 1);
      }
      return;
    }
    case GgmlType::IQ4_XS: {
      const auto* b = reinterpret_cast<const BlockIQ4_XS*>(row + c * sizeof(BlockIQ4_XS));
      std::memcpy(&u.d, &b->d, 2);
      for (int ib = 0; ib < 8; ++ib) {
        u.ls[ib] = uint8_t(((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b->scales_h >> (2 * ib)) & 3) << 4));
        for (int j = 0; j < 16; ++j) {
          u.code[32 * ib + j] = uint8_t(b->qs[16 * ib + j] & 15);
          u.code[32 * ib + j + 16] = uint8_t(b->qs[16 * ib + j] >> 4);
        }
      }
      return;
    }
    case GgmlType::IQ4_NL: {
      const auto* b = reinterpret_cast<const BlockIQ4_NL*>(row + c * sizeof(BlockIQ4_NL));
      std::memcpy(&u.d, &b->d, 2);
      for (int j = 0; j < 16; ++j) {
        u.code[j] = uint8_t(b->qs[j] & 15);
        u.code[j + 16] = uint8_t(b->qs[j] >> 4);
      }
      return;
    }
    default: STRATA_CHECK(false, "gpu layout: not an i-quant");
  }
}

// Writes (write = true) or reads row g's share of an i-quant tile (gpu_layout.h "i-quants").
void iq_tile_io(GgmlType t, uint8_t* tile, int g, IqUnpacked& u, bool write) {
  const TypeLayout L = type_layout(t);
  auto bit_io = [&](uint8_t* byte, int bit, uint8_t& v) {
    if (write) *byte = uint8_t(*byte | ((v & 1) << bit));
    else v = uint8_t((*byte >> bit) & 1);
  };
  auto io = [&](uint8_t* p, void* v, size_t n) {
    if (write) std::memcpy(p, v, n);
    else std::memcpy(v, p, n);
  };
  if (t == GgmlType::IQ4_NL) {
    for (int tt = 0; tt < 4; ++tt)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i) {
          const int n = 4 * h + i, e = elem(0, h, tt, i);
          uint8_t* p = tile + (4 * g + tt) * 4 + n / 2;
          if (write) *p = uint8_t(*p | (iq4_perm(u.code[e]) << (4 * (n % 2))));
          else u.code[e] = iq4_perm(uint8_t((*p >> (4 * (n % 2))) & 15));
        }
    io(tile + L.d + 2 * g, &u.d, 2);
    return;
  }
  for (int tt = 0; tt < 4; ++tt) {
    const int lane = 4 * g + tt, h0 = tt & 1;
    for (int j = 0; j < 8; ++j) {  // slot j holds sub-block j ^ 2 tt
      const int s = j ^ (2 * tt), m = j / 4;
      for (int h = 0; h < 2; ++h) {
        const int q = 8 * s + 4 * h + tt;  // the lane's 4-element group
        const int b = (j & 3) + 4 * h;     // its bit in the sign bytes
        if (t == GgmlType::IQ4_XS) {
          for (int i = 0; i < 4; ++i) {
            const int n = 4 * h + i, e = elem(s, h, tt, i);
            uint8_t* p = tile + lane * 32 + 4 * j + n / 2;
            if (write) *p = uint8_t(*p | (iq4_perm(u.code[e]) << (4 * (n % 2))));
            else u.code[e] = iq4_perm(uint8_t((*p >> (4 * (n % 2))) & 15));
          }
          continue;
        }
        uint8_t* idx = tile + lane * 16 + 2 * j + h;
        if (write) *idx = uint8_t(u.grid[q] & 0xff);
        else u.grid[q] = *idx;
        if (t == GgmlType::IQ3_S) {
          uint8_t hb = uint8_t(u.grid[q] >> 8);
          bit_io(tile + 768 + lane * 2 + (2 * j + h) / 8, (2 * j + h) % 8, hb);
          if (!write) u.grid[q] = uint16_t(u.grid[q] | (hb << 8));
        }
        uint8_t* sg = tile + L.qh + lane * 8 + 4 * m;
        const int e0 = elem(s, h, tt, 0);
        const int stored = t == GgmlType::IQ3_XXS ? 3 : 4;  // IQ3_XXS: the 4th sign from the parity
        for (int i = 0; i < stored; ++i) bit_io(sg + i, b, u.sign[e0 + i]);
        if (t == GgmlType::IQ3_XXS) {
          // P = parity of the group's 4 signs (= that of the other half of its 8, whose 8 signs have
          // even parity), kept by lane tt when h == tt % 2, by lane tt ^ 1 otherwise; that lane's
          // slot for this sub-block is j ^ 2.
          const bool own = h == h0;
          const int keeper = own ? lane : lane ^ 1, kj = own ? j : j ^ 2, kh0 = own ? h0 : 1 - h0;
          uint8_t* pbyte = tile + L.qh + keeper * 8 + 3;
          const int pbit = 4 * (kh0 ^ m) + (kj & 3);
          uint8_t p = uint8_t(u.sign[e0] ^ u.sign[e0 + 1] ^ u.sign[e0 + 2] ^ u.sign[e0 + 3]);
          if (write) {
            if (own) bit_io(pbyte, pbit, p);
          } else {
            bit_io(pbyte, pbit, p);
            u.sign[e0 + 3] = uint8_t(p ^ u.sign[e0] ^ u.sign[e0 + 1] ^ u.sign[e0 + 2]);
          }
        }
      }
    }
    if (t == GgmlType::IQ3_XXS) {  // the scale codes of sub-blocks 2 tt, 2 tt + 1
      uint8_t* p = tile + L.qh + lane * 8 + 7;
      if (write) *p = uint8_t(u.ls[2 * tt] | (u.ls[2 * tt + 1] << 4));
      else u.ls[2 * tt] = uint8_t(*p & 15), u.ls[2 * tt + 1] = uint8_t(*p >> 4);
    }
  }
  switch (t) {
    case GgmlType::IQ3_XXS: io(tile + L.d + 2 * g, &u.d, 2); break;
    case GgmlType::IQ3_S: {
      uint8_t sc[4];
      for (int k = 0; k < 4; ++k) sc[k] = uint8_t(u.ls[2 * k] | (u.ls[2 * k + 1] << 4));
      io(tile + 832 + 4 * g, sc, 4);
      for (int k = 0; k < 4; ++k) u.ls[2 * k] = uint8_t(sc[k] & 15), u.ls[2 * k + 1] = uint8_t(sc[k] >> 4);
      io(tile + L.d + 2 * g, &u.d, 2);
      break;
    }
    case GgmlType::IQ4_XS: {
      // Per row 8 bytes: f16 d; 16 bits H, nibble k = high 2 bits of ls k | those of ls k + 4 << 2;
      // 4 bytes, byte k = low 4 bits of ls k | those of ls k + 4 << 4.
      uint8_t* p = tile + L.sc + 8 * g;
      if (write) {
        uint16_t H = 0;
        for (int k = 0; k < 4; ++k) {
          H = uint16_t(H | (((u.ls[k] >> 4) | ((u.ls[k + 4] >> 4) << 2)) << (4 * k)));
          p[4 + k] = uint8_t((u.ls[k] & 15) | ((u.ls[k + 4] & 15) << 4));
        }
        std::memcpy(p, &u.d, 2);
        std::memcpy(p + 2, &H, 2);
      } else {
        uint16_t H;
        std::memcpy(&u.d, p, 2);
        std::memcpy(&H, p + 2, 2);
        for (int k = 0; k < 4; ++k) {
          const int n = (H >> (4 * k)) & 15;
          u.ls[k] = uint8_t((p[4 + k] & 15) | ((n & 3) << 4));
          u.ls[k + 4] = uint8_t((p[4 + k] >> 4) | ((n >> 2) << 4));
        }
      }
      break;
    }
    default: break;
  }
}

// The CPU decoders' expressions (kernels/cpu/quant/iq_types.cpp), on the integers.
void iq_decode(GgmlType t, const IqUnpacked& u, float* y) {
  const float d = f16_to_f32(u.d);
  auto sgn = [&](int e) { return u.sign[e] ? -1.0f : 1.0f; };
  switch (t) {
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
      for (int ib = 0; ib < 8; ++ib) {
        const float db = t == GgmlType::IQ3_XXS ? d * (0.5f + float(u.ls[ib])) * 0.5f : d * float(1 + 2 * u.ls[ib]);
        for (int q = 0; q < 8; ++q) {
          const uint32_t g = t == GgmlType::IQ3_XXS ? kIq3xxsGrid.v[u.grid[8 * ib + q]] : kIq3sGrid.v[u.grid[8 * ib + q]];
          for (int k = 0; k < 4; ++k) {
            const int e = 32 * ib + 4 * q + k;
            y[e] = db * float(uint8_t(g >> (8 * k))) * sgn(e);
          }
        }
      }
      return;
    case GgmlType::IQ4_XS:
      for (int ib = 0; ib < 8; ++ib) {
        const float dl = d * float(int(u.ls[ib]) - 32);
        for (int j = 0; j < 32; ++j) y[32 * ib + j] = dl * float(kValuesIq4nl[u.code[32 * ib + j]]);
      }
      return;
    case GgmlType::IQ4_NL:
      for (int j = 0; j < 32; ++j) y[j] = d * float(kValuesIq4nl[u.code[j]]);
      return;
    default: return;
  }
}

}  // namespace

int gpu_layout_tile_bytes(GgmlType t) { return type_layout(t).tile; }
int gpu_layout_chunk(GgmlType t) { return type_layout(t).chunk; }

uint64_t gpu_layout_bytes(GgmlType t, int64_t n_in, int64_t n_out) {
  const TypeLayout L = type_layout(t);
  if (L.chunk == 0 || n_in <= 0 || n_out <= 0 || n_in % L.chunk != 0) return 0;
  const uint64_t groups = uint64_t((n_out + kGpuRowGroup - 1) / kGpuRowGroup);
  return groups * uint64_t(n_in / L.chunk) * uint64_t(L.tile);
}

WeightView gpu_layout_view(const uint8_t* data, GgmlType t, int64_t n_in, int64_t n_out) {
  const TypeLayout L = type_layout(t);
  WeightView v{data, t, n_in, n_out, 0, WeightLayout::kGpu};
  if (L.chunk) v.row_bytes = uint64_t(n_in / L.chunk) * uint64_t(L.tile / kGpuRowGroup);
  return v;
}

namespace {

// ---- The repacker's writer (K types, q8_0) ----
// Four codes at a time: the lane's 4 elements of one (slot, half) are the 4 bytes of a word in
// every stream, so each stream gets one masked, shifted word per (lane, slot, half). (A writer
// placing each bit by tile_read's rules ran at ~0.07 GB/s per core: a 27B model took ~30 s to
// load.) The round trip through tile_read (test_gpu_layout) checks it bit for bit.
uint32_t load_word(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}
void or_word(uint8_t* p, uint32_t w) { const uint32_t v = load_word(p) | w; std::memcpy(p, &v, 4); }

// Row g's codes (u.code) into a zeroed tile, then its scales.
void tile_write(GgmlType t, uint8_t* tile, int g, Unpacked& u) {
  const TypeLayout L = type_layout(t);
  const int subs = L.chunk / 32;
  for (int tt = 0; tt < 4; ++tt) {
    const int lane = 4 * g + tt;
    for (int s = 0; s < subs; ++s) {
      const int sub = subs == 8 ? s ^ (2 * tt) : s;  // slot s holds sub-block s ^ 2 tt
      for (int h = 0; h < 2; ++h) {
        const uint32_t c4 = load_word(u.code + elem(sub, h, tt, 0));  // byte i: element i's code
        switch (t) {
          case GgmlType::Q8_0: std::memcpy(tile + L.qs + lane * 8 + 4 * h, &c4, 4); break;
          case GgmlType::Q4_K:
          case GgmlType::Q5_K:
          case GgmlType::Q6_K:
            or_word(tile + L.qs + lane * 32 + 4 * s, (c4 & 0x0F0F0F0Fu) << (4 * h));
            if (t == GgmlType::Q5_K) {  // bit 4 of element i -> bit 4 h + i of the slot's byte
              const uint32_t hb = (c4 >> 4) & 0x01010101u;
              const uint32_t nib = (hb | hb >> 7 | hb >> 14 | hb >> 21) & 0xFu;
              tile[L.qh + lane * 8 + s] = uint8_t(tile[L.qh + lane * 8 + s] | (nib << (4 * h)));
            }
            if (t == GgmlType::Q6_K)
              or_word(tile + L.qh + lane * 16 + 4 * (s / 2), ((c4 >> 4) & 0x03030303u) << (4 * (s % 2) + 2 * h));
            break;
          case GgmlType::Q3_K: {
            auto word = [&](int n) { return n < 4 ? tile + L.qs + lane * 16 + 4 * n : tile + L.qh + lane * 8 + 4 * (n - 4); };
            const Q3Place p = q3_place(s, h);
            or_word(word(p.word_low), (c4 & 0x03030303u) << p.bit_low);
            or_word(word(p.word_high), ((c4 >> 2) & 0x01010101u) << p.bit_high);
            break;
          }
          default: break;
        }
      }
    }
  }
  scales_io(t, tile, g, u, true);
}

}  // namespace

void repack_to_gpu_layout(const WeightView& src, uint8_t* dst) {
  const TypeLayout L = type_layout(src.type);
  STRATA_CHECK(src.layout == WeightLayout::kGguf, "repack_to_gpu_layout: source is not in the GGUF layout");
  STRATA_CHECK(L.chunk != 0 && src.n_in % L.chunk == 0, "repack_to_gpu_layout: type not repacked or bad row length");
  const int64_t n_chunks = src.n_in / L.chunk;
  const int64_t groups = (src.n_out + kGpuRowGroup - 1) / kGpuRowGroup;
  const bool iq = is_iq(src.type);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, groups, 16), [&](const tbb::blocked_range<int64_t>& r) {
    Unpacked u;
    IqUnpacked iu;
    for (int64_t G = r.begin(); G < r.end(); ++G) {
      uint8_t* group = dst + uint64_t(G) * uint64_t(n_chunks) * uint64_t(L.tile);
      std::memset(group, 0, uint64_t(n_chunks) * uint64_t(L.tile));
      for (int g = 0; g < kGpuRowGroup; ++g) {
        const int64_t row = G * kGpuRowGroup + g;
        if (row >= src.n_out) break;  // padding rows stay zero
        for (int64_t c = 0; c < n_chunks; ++c) {
          if (iq) {
            iu = IqUnpacked{};
            iq_unpack(src.type, src.row(row), c, iu);
            iq_tile_io(src.type, group + c * L.tile, g, iu, true);
            continue;
          }
          unpack(src.type, src.row(row), c, u);  // sets every field the type uses
          tile_write(src.type, group + c * L.tile, g, u);
        }
      }
    }
  });
}

void dequantize_gpu_layout_row(const WeightView& v, int64_t r, float* out) {
  const TypeLayout L = type_layout(v.type);
  STRATA_CHECK(v.layout == WeightLayout::kGpu && L.chunk != 0, "dequantize_gpu_layout_row: not a gpu-layout view");
  STRATA_CHECK(r >= 0 && r < v.n_out, "dequantize_gpu_layout_row: row out of range");
  const int64_t n_chunks = v.n_in / L.chunk;
  const int64_t G = r / kGpuRowGroup;
  const int g = int(r % kGpuRowGroup);
  Unpacked u;
  IqUnpacked iu;
  for (int64_t c = 0; c < n_chunks; ++c) {
    uint8_t* tile = const_cast<uint8_t*>(v.data) + uint64_t(G * n_chunks + c) * uint64_t(L.tile);
    if (is_iq(v.type)) {
      iu = IqUnpacked{};
      iq_tile_io(v.type, tile, g, iu, false);  // read-only when write == false
      iq_decode(v.type, iu, out + c * L.chunk);
      continue;
    }
    u = Unpacked{};
    tile_read(v.type, tile, g, u);
    decode(v.type, u, L.chunk, out + c * L.chunk);
  }
}

}  // namespace strata::kernels
