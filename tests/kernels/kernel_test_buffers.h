// Buffers shared by the CPU kernel tests: poisoned aligned storage (so that a byte a kernel should
// have written, and did not, shows) and rows of random quantised blocks of a type.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::test {

// `bytes` of storage filled with `poison`, at a 64-byte aligned address.
struct PoisonedBuffer {
  std::vector<uint8_t> storage;
  void* at;
  PoisonedBuffer(size_t bytes, uint8_t poison) : storage(bytes + 64, poison) {
    auto base = reinterpret_cast<uintptr_t>(storage.data());
    at = reinterpret_cast<void*>((base + 63) / 64 * 64);
  }
};

// `rows` rows of n elements of random blocks of `type` (its fill_random, scale 0.05).
inline std::vector<uint8_t> random_quant_rows(GgmlType type, int64_t n, int64_t rows, Rng& rng) {
  const auto* k = kernels::cpu::quant_kernels(type);
  const uint64_t rb = ggml_row_bytes(type, uint64_t(n));
  std::vector<uint8_t> w(rb * uint64_t(rows));
  for (int64_t r = 0; r < rows; ++r) k->fill_random(w.data() + r * rb, n, rng, 0.05f);
  return w;
}

}  // namespace strata::test
