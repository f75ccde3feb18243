// quantize_q8_act (kernels/cpu/q8_act.h) with the CPU's SIMD body against the portable loop: the
// same codes, scales and sums bit for bit, on inputs chosen to hit the rounding edges (exact
// halves after scaling, the clamp's last ulp, all-zero and one-element groups, signed zeros), on
// columns with and without a tail past the last whole 256-element chunk. The codes' definition
// itself (half to even, |error| <= d / 2) is test_dot_q8's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/q8_act.h"
#include "kernel_test_buffers.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::kernels::cpu;

// Random groups, some of them rebuilt so that x * id lands on k + 0.5 (ties both ways) or on
// +-127 exactly, some all zero, some a single nonzero element, some of signed zeros.
std::vector<float> edge_inputs(int64_t count, Rng& rng) {
  std::vector<float> x = test::random_normal(size_t(count), rng);
  for (int64_t g = 0; g < count / 32; ++g) {
    float* xg = x.data() + g * 32;
    // A power of two for the tie cases: d = 127 * scale / 127 = scale exactly, so x * id is exact.
    const float scale = g % 6 == 0 ? std::exp2(rng.uniform(-20.0f, 20.0f)) : std::exp2(std::floor(rng.uniform(-20.0f, 20.0f)));
    switch (g % 6) {
      case 0: for (int i = 0; i < 32; ++i) xg[i] *= scale; break;
      case 1:  // amax 127 * scale: every x = (k + 0.5) * scale for a k, id = 1 / scale up to rounding
        for (int i = 0; i < 32; ++i) xg[i] = (float(int(rng.next_u32() % 254) - 127) + 0.5f) * scale;
        xg[rng.next_u32() % 32] = 127.0f * scale;
        break;
      case 2: for (int i = 0; i < 32; ++i) xg[i] = 0.0f; break;
      case 3:
        for (int i = 0; i < 32; ++i) xg[i] = 0.0f;
        xg[rng.next_u32() % 32] = -scale;
        break;
      case 4: for (int i = 0; i < 32; ++i) xg[i] = (i % 2) ? -0.0f : 0.0f; break;
      default: for (int i = 0; i < 32; ++i) xg[i] = (rng.next_u32() % 2 ? 127.0f : -126.5f) * scale; break;
    }
  }
  return x;
}

}  // namespace

TEST_CASE("int8 activations: quantize_q8_act equals the portable loop bit for bit", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t n : {32, 96, 256, 512, 512 + 3 * 32, 1024, 2048 + 32}) {
    for (const int64_t n_col : {1, 3}) {
      INFO("n " << n << " columns " << n_col);
      const std::vector<float> x = edge_inputs(n * n_col, rng);
      const size_t bytes = q8_act_bytes(n, n_col);
      test::PoisonedBuffer a(bytes, 0xA5), b(bytes, 0x5A);  // poisoned apart: a byte one of them leaves unwritten differs
      const Q8ActView va = quantize_q8_act(x.data(), n, n_col, a.at);
      const Q8ActView vb = quantize_q8_act_portable(x.data(), n, n_col, b.at);
      const size_t groups = size_t(n / 32 * n_col);
      REQUIRE(std::memcmp(va.q, vb.q, size_t(n * n_col)) == 0);
      REQUIRE(std::memcmp(va.d, vb.d, groups * sizeof(float)) == 0);
      REQUIRE(std::memcmp(va.s, vb.s, 2 * groups * sizeof(int16_t)) == 0);
      REQUIRE(std::memcmp(va.sf, vb.sf, groups * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("int8 activations: quantize_q8_act_range piece by piece equals quantize_q8_act", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const int64_t n : {64, 512, 512 + 3 * 32, 1024 + 32}) {
    const int64_t n_col = 3;
    INFO("n " << n);
    const std::vector<float> x = edge_inputs(n * n_col, rng);
    const size_t bytes = q8_act_bytes(n, n_col);
    test::PoisonedBuffer whole(bytes, 0xA5), pieces(bytes, 0xA5);
    quantize_q8_act(x.data(), n, n_col, whole.at);
    const Q8ActView v = q8_act_layout(n, n_col, pieces.at);
    // Random cuts at whole groups, the pieces quantised last to first; column 1 left out at first.
    std::vector<int64_t> cuts = {0, n};
    for (int k = 0; k < 4; ++k) cuts.push_back(int64_t(rng.next_u32() % uint32_t(n / 32 + 1)) * 32);
    std::sort(cuts.begin(), cuts.end());
    for (const int c : {2, 0})
      for (size_t j = cuts.size() - 1; j > 0; --j) quantize_q8_act_range(x.data(), v, c, cuts[j - 1], cuts[j]);
    // Column 1 untouched: its codes and scales still hold the poison.
    for (int64_t i = 0; i < n; ++i) REQUIRE(uint8_t(v.col_q(1)[i]) == 0xA5);
    std::vector<uint8_t> poison_d(sizeof(float) * size_t(n / 32), 0xA5);
    REQUIRE(std::memcmp(v.col_d(1), poison_d.data(), poison_d.size()) == 0);
    quantize_q8_act_range(x.data(), v, 1, 0, n);
    REQUIRE(std::memcmp(whole.at, pieces.at, bytes) == 0);
  }
}
