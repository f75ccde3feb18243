// KV quantisation: the round-trip error bound of each scheme (kv/kv_quant.h), and attention over
// quantised KV == attention over the dequantised values held in an f32 store.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/quant/blocks.h"
#include "kv/kv_cache.h"
#include "kv/kv_quant.h"
#include "test_util.h"

using namespace strata;
namespace cpu = strata::kernels::cpu;

namespace {

// The stored scale of group g of a quantised row.
float group_scale(GgmlType t, const std::vector<uint8_t>& row, size_t g) {
  if (t == GgmlType::Q8_0) return f16_to_f32(reinterpret_cast<const cpu::BlockQ8_0*>(row.data())[g].d);
  return f16_to_f32(reinterpret_cast<const cpu::BlockQ4_1*>(row.data())[g].d);
}

// Rows of different character: gaussian, one outlier per group, constant groups, tiny and large.
std::vector<float> test_row(uint32_t n, Rng& rng, int kind) {
  std::vector<float> x = test::random_normal(n, rng, kind == 3 ? 1e-4f : kind == 4 ? 300.0f : 1.0f);
  if (kind == 1)
    for (uint32_t g = 0; g < n / 32; ++g) x[g * 32 + rng.next_u32() % 32] *= 40.0f;
  if (kind == 2)
    for (uint32_t g = 0; g < n / 32; ++g) std::fill(x.begin() + g * 32, x.begin() + g * 32 + 32, x[g * 32]);
  return x;
}

}  // namespace

TEST_CASE("kv quant: round-trip error within d/2 of the group's stored scale", "[kv]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_1}) {
    for (int kind = 0; kind < 5; ++kind) {
      INFO("type " << kv::kv_type_name(t) << " kind " << kind);
      const uint32_t n = 256;
      const auto x = test_row(n, rng, kind);
      std::vector<uint8_t> row(kv::kv_row_bytes(t, n));
      kv::kv_quantize_row(t, x.data(), row.data(), n);
      std::vector<float> y(n);
      kv::kv_dequantize_row(t, row.data(), y.data(), n);
      double worst = 0;  // error / (d/2)
      for (uint32_t i = 0; i < n; ++i) {
        const double d = group_scale(t, row, i / 32);
        const double err = std::fabs(double(y[i]) - double(x[i]));
        const double bound = d / 2 + 0x1p-16 * (d + std::fabs(x[i]));
        INFO("i " << i << " x " << x[i] << " y " << y[i] << " d " << d);
        REQUIRE(err <= bound);
        if (d > 0) worst = std::max(worst, err / (d / 2));
      }
      // The scale is the range's: not wastefully large (within f16 rounding of max|x|/127 or
      // (max - min)/15), so the bound is also a bound in terms of the data.
      for (uint32_t g = 0; g < n / 32; ++g) {
        const auto [lo, hi] = std::minmax_element(x.begin() + g * 32, x.begin() + g * 32 + 32);
        const double range = t == GgmlType::Q8_0 ? std::max(std::fabs(*lo), std::fabs(*hi)) / 127.0 : (*hi - *lo) / 15.0;
        CHECK(group_scale(t, row, g) <= range * (1 + 0x1p-9) + 0x1p-13 * std::fabs(*lo) + 0x1p-24);
      }
      if (kind == 0) CHECK(worst > 0.5);  // the bound is reached in practice, not vacuous
    }
  }
}

TEST_CASE("kv quant: f16 neighbours round the right way", "[kv]") {
  for (float x : {0.0f, 1e-9f, -1e-9f, 1.0f, -1.0f, 0.1f, -0.1f, 3.14159f, -65504.0f, 65504.0f, 7e4f, -7e4f, 6.1e-5f}) {
    INFO("x " << x);
    const float up = f16_to_f32(kv::f16_round_up(x)), down = f16_to_f32(kv::f16_round_down(x));
    if (std::fabs(x) <= 65504.0f) {
      CHECK(up >= x);
      CHECK(down <= x);
      CHECK(f32_to_f16(x) == (up - x <= x - down ? kv::f16_round_up(x) : kv::f16_round_down(x)));
    }
    CHECK(std::isfinite(up));
    CHECK(std::isfinite(down));
  }
}

TEST_CASE("kv quant: names and head_dim check", "[kv]") {
  CHECK(kv::kv_type_from_name("q8") == GgmlType::Q8_0);
  CHECK(kv::kv_type_from_name("q8_0") == GgmlType::Q8_0);
  CHECK(kv::kv_type_from_name("q4") == GgmlType::Q4_1);
  CHECK(kv::kv_type_from_name("q4_1") == GgmlType::Q4_1);
  CHECK(kv::kv_type_from_name("f16") == GgmlType::F16);
  CHECK_FALSE(kv::kv_type_from_name("q4_0").has_value());
  CHECK_FALSE(kv::kv_type_from_name("bf16").has_value());
  CHECK(kv::check_kv_type(GgmlType::Q8_0, 64).is_ok());
  CHECK_FALSE(kv::check_kv_type(GgmlType::Q4_1, 48).is_ok());
  CHECK(kv::check_kv_type(GgmlType::F16, 48).is_ok());
  CHECK_FALSE(kv::check_kv_type(GgmlType::Q4_0, 64).is_ok());
  auto c = kv::KvCache::create({{96, 0, 48}}, 16, 4, GgmlType::F16, GgmlType::Q8_0);
  REQUIRE_FALSE(c.is_ok());
  CHECK_THAT(c.message(), Catch::Contains("head_dim is 48"));
  CHECK(kv::kv_row_bytes(GgmlType::Q8_0, 128) == 4 * 34);
  CHECK(kv::kv_row_bytes(GgmlType::Q4_1, 128) == 4 * 20);
}

namespace {

struct AttnCase {
  int64_t n_head, n_head_kv, head_dim, window;
  uint32_t n_ctx, margin;
};

// Fills a cache of (k_type, v_type) and an f32 cache holding the dequantised values, for
// positions [0, n); returns both.
std::pair<kv::KvCache, kv::KvCache> filled(const AttnCase& c, GgmlType kt, GgmlType vt, uint32_t n, Rng& rng) {
  const uint32_t width = uint32_t(c.n_head_kv * c.head_dim);
  const std::vector<kv::LayerShape> shape{{width, uint32_t(c.window), uint32_t(c.head_dim)}};
  auto q = kv::KvCache::create(shape, c.n_ctx, c.margin, kt, vt);
  auto f = kv::KvCache::create(shape, c.n_ctx, c.margin, GgmlType::F32, GgmlType::F32);
  REQUIRE(q.is_ok());
  REQUIRE(f.is_ok());
  std::vector<float> kd(width), vd(width);
  for (uint32_t p = 0; p < n; ++p) {
    // K with a per-channel offset (as real keys have): exercises Q4_1's offset.
    auto k = test::random_normal(width, rng, 1.0f), v = test::random_normal(width, rng, 0.5f);
    for (uint32_t i = 0; i < width; ++i) k[i] += 0.5f * float(i % 7);
    q->write(0, p, k.data(), v.data());
    kv::kv_dequantize_row(kt, q->k_row(0, p), kd.data(), width);
    kv::kv_dequantize_row(vt, q->v_row(0, p), vd.data(), width);
    f->write(0, p, kd.data(), vd.data());
  }
  return {std::move(q.value()), std::move(f.value())};
}

}  // namespace

TEST_CASE("kv quant: attention over quantised KV equals attention over its dequantised values", "[kv]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const GgmlType types[] = {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1};
  const AttnCase cases[] = {
      {8, 2, 64, 0, 300, 16},    // GQA 4, full
      {4, 4, 32, 0, 100, 8},     // MHA, full
      {8, 2, 128, 40, 300, 16},  // GQA, sliding: the ring wraps (capacity 56)
      {6, 3, 96, 17, 200, 5},    // sliding, odd window, GQA 2
  };
  for (const auto& c : cases) {
    for (GgmlType kt : types) {
      for (GgmlType vt : types) {
        if (kt != vt && kt != GgmlType::Q8_0 && vt != GgmlType::Q4_1) continue;  // mixed pairs: a sample
        INFO("hd " << c.head_dim << " window " << c.window << " k " << kv::kv_type_name(kt) << " v "
                   << kv::kv_type_name(vt));
        const uint32_t n = c.n_ctx - 3;
        auto [qc, fc] = filled(c, kt, vt, n, rng);
        const cpu::AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.window, 1.0f / std::sqrt(float(c.head_dim))};
        // Decode (one query at the end) and a multi-query chunk (the last `margin` positions:
        // every key they see is still in the ring).
        for (uint32_t n_q : {1u, c.margin}) {
          std::vector<int32_t> pos(n_q);
          for (uint32_t i = 0; i < n_q; ++i) pos[i] = int32_t(n - n_q + i);
          const auto q = test::random_normal(size_t(n_q) * c.n_head * c.head_dim, rng, 1.0f);
          std::vector<float> got(q.size(), NAN), want(q.size(), NAN);
          cpu::attention(q.data(), pos.data(), n_q, qc.view(0), s, got.data());
          cpu::attention(q.data(), pos.data(), n_q, fc.view(0), s, want.data());
          for (size_t i = 0; i < q.size(); ++i) {
            INFO("n_q " << n_q << " i " << i);
            REQUIRE(std::fabs(got[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i])));
          }
        }
      }
    }
  }
}
