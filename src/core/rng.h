// Deterministic, fast, splittable random numbers (splitmix64 seeding + xoshiro256**). Used by
// synthetic models and tests: the same seed gives the same bits on every machine and thread count,
// because each stream is derived from (seed, stream id), not from thread scheduling.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0) {
    uint64_t sm = seed ^ (stream * 0xd1b54a32d192ed03ull);
    for (auto& w : s_) w = splitmix64(sm);
  }
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3];
    s_[2] ^= t; s_[3] = rotl(s_[3], 45);
    return result;
  }
  uint32_t next_u32() { return uint32_t(next_u64() >> 32); }
  // Uniform in [0, 1).
  float uniform() { return float(next_u64() >> 40) * 0x1p-24f; }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller; one value per call, simplicity over speed).
  float normal() {
    const float u1 = (float(next_u64() >> 40) + 0.5f) * 0x1p-24f;
    const float u2 = uniform();
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace strata
