// Format constants of the GGML i-quants: the lattice grids, the sign table and the IQ4 values.
// These are facts of the file format (a file quantised by ggml indexes these exact tables), so
// they are data, not code: the tables themselves live in iq_grids.cpp (generated at compile time
// from the packed form published with ggml; see there for the source).
//
// Grid entries are stored the way ggml stores them, one byte per element packed little-endian into
// an integer: element j of entry i is byte j of kIq2xxsGrid[i] etc. The 2-bit grids hold the
// magnitudes {8, 25, 43}, the 3-bit grids {4, 12, ..., 62} (iq3xxs) and {1, 3, ..., 15} (iq3s);
// the iq1s grid holds signed bytes {-1, 0, +1}.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels::cpu {

// A plain aggregate (no member functions: the SIMD files index it without instantiating any
// shared inline code, see dot_avx2.cpp's ISA hygiene note).
template <typename T, size_t N>
struct GridTable {
  T v[N];
};

extern const GridTable<uint64_t, 256> kIq2xxsGrid;   // IQ2_XXS: 8 elements of {8, 25, 43}
extern const GridTable<uint64_t, 512> kIq2xsGrid;    // IQ2_XS
extern const GridTable<uint64_t, 1024> kIq2sGrid;    // IQ2_S
extern const GridTable<uint32_t, 256> kIq3xxsGrid;   // IQ3_XXS: 4 elements of {4, 12, ..., 62}
extern const GridTable<uint32_t, 512> kIq3sGrid;     // IQ3_S: 4 elements of {1, 3, ..., 15}
extern const GridTable<uint64_t, 2048> kIq1sGrid;    // IQ1_S, IQ1_M: 8 int8 elements of {-1, 0, 1}

// 7 stored sign bits -> 8 sign bits: bit 7 makes the number of set bits even (ggml's
// ksigns_iq2xs). Bit j set = element j negative.
extern const GridTable<uint8_t, 128> kKsignsIq2xs;

// The 16 non-linear levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kValuesIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// IQ1_S / IQ1_M: every grid value is shifted by +-kIq1Delta (sign from a bit per group).
inline constexpr float kIq1Delta = 0.125f;

}  // namespace strata::kernels::cpu
