#include "io/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace strata::io {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // CRC-32C, bit-reversed

// Slicing-by-8 tables: t[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
};
constexpr Tables kTables;

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = uint32_t(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t crc32c_portable(std::span<const uint8_t> data, uint32_t crc) {
  const auto& t = kTables.t;
  const uint8_t* p = data.data();
  size_t n = data.size();
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian host (x86, arm64)
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xff];
  return ~c;
}

uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc) {
#if defined(__x86_64__)
  if (kHaveSse42) return ~crc32c_sse42(data.data(), data.size(), ~crc);
#endif
  return crc32c_portable(data, crc);
}

}  // namespace strata::io
