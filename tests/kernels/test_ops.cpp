// CPU element-wise ops: RoPE over many heads at once against the one-head form, and what a
// rotation must preserve.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/ops.h"

using namespace strata;
using namespace strata::kernels::cpu;

TEST_CASE("rope_heads rotates every head exactly as rope does one", "[ops]") {
  const int64_t n_heads = 5, hd = 64;
  std::vector<float> freq_div(size_t(hd / 2));
  for (size_t i = 0; i < freq_div.size(); ++i) freq_div[i] = 1.0f + 0.25f * float(i % 7);
  Rng rng(11, 2);
  std::vector<float> x(size_t(n_heads * hd));
  for (auto& v : x) v = rng.uniform() * 2.0f - 1.0f;
  for (bool neox : {false, true})
    for (const float* fd : {static_cast<const float*>(nullptr), static_cast<const float*>(freq_div.data())})
      for (float pos : {0.0f, 1.0f, 4097.0f, 131071.0f}) {
        INFO("neox " << neox << ", freq_div " << (fd != nullptr) << ", pos " << pos);
        std::vector<float> one = x, all = x;
        for (int64_t h = 0; h < n_heads; ++h) rope(one.data() + h * hd, hd, pos, 10000.0f, fd, neox);
        rope_heads(all.data(), n_heads, hd, pos, 10000.0f, fd, neox);
        CHECK(std::memcmp(one.data(), all.data(), one.size() * sizeof(float)) == 0);
        // A rotation: position 0 is the identity, and every rotated pair keeps its length.
        const int64_t half = hd / 2;
        double worst = 0;
        for (int64_t h = 0; h < n_heads; ++h)
          for (int64_t i = 0; i < half; ++i) {
            const int64_t a = h * hd + (neox ? i : 2 * i), b = h * hd + (neox ? i + half : 2 * i + 1);
            const double before = std::hypot(double(x[size_t(a)]), double(x[size_t(b)]));
            const double after = std::hypot(double(all[size_t(a)]), double(all[size_t(b)]));
            worst = std::max(worst, std::fabs(after - before));
          }
        CHECK(worst < 1e-6);
        if (pos == 0.0f) CHECK(all == x);
      }
}
