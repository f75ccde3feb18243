// Little-endian integers read from any byte address (the packed fields of quantised blocks), for
// the SIMD kernel files' common headers (avx2_common.h, avx512_common.h). In an anonymous
// namespace like them, so each ISA's translation unit keeps its own copy.
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {
namespace {

inline uint16_t load_u16(const void* p) {
  uint16_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t load_u32(const void* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace
}  // namespace strata::kernels::cpu
