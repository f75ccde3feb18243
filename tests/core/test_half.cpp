#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>

#include "core/half.h"

using namespace strata;

TEST_CASE("f16 -> f32 -> f16 is the identity for every non-NaN f16", "[core][half]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      CHECK((h & 0x7c00) == 0x7c00);
      CHECK(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    INFO("h = " << h);
    REQUIRE(f32_to_f16(f) == h);
  }
}

TEST_CASE("f32 -> f16 rounds to nearest even, saturates to inf, keeps subnormals", "[core][half]") {
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65519.0f) == 0x7bff);  // below the midpoint to 65536
  CHECK(f32_to_f16(65520.0f) == 0x7c00);  // the midpoint rounds to even: inf
  CHECK(f32_to_f16(1e10f) == 0x7c00);
  CHECK(f32_to_f16(-1e10f) == 0xfc00);
  CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(f32_to_f16(0x1p-24f) == 0x0001);       // smallest subnormal
  CHECK(f32_to_f16(0x1p-25f) == 0x0000);       // halfway to zero: ties to even (0)
  CHECK(f32_to_f16(0x1.8p-24f) == 0x0002);     // 1.5 ulp: ties to even (2)
  CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);  // exactly half an ulp above 1: even (down)
  CHECK(f32_to_f16(1.0f + 0x1.8p-10f) == 0x3c02);  // 1.5 ulp: even (up)
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  // Every rounding agrees with a reference: the nearest of the two neighbouring f16 values.
  for (uint32_t h = 0; h < 0x7bff; h += 7) {
    const float lo = f16_to_f32(uint16_t(h)), hi = f16_to_f32(uint16_t(h + 1));
    const float q1 = lo + (hi - lo) * 0.25f, q3 = lo + (hi - lo) * 0.75f;
    CHECK(f32_to_f16(q1) == h);
    CHECK(f32_to_f16(q3) == h + 1);
  }
}

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN", "[core][half]") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(f32_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie -> even
  CHECK(f32_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie -> even (up)
  CHECK(f32_to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));  // NaN, not inf
}
