// The tiled (prefill) CPU attention against the per-query kernel it stands in for: same masks
// (causal, sliding window, ring slots), grouped KV heads, every KV type, query tiles and key tiles
// that do not divide the counts. Sums run in another order, so the bound is f32 rounding; a wrong
// mask or a lost key moves an output by ~|v| / (keys seen), far above it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_tiled.h"
#include "kernels/cpu/quant_kernels.h"

namespace {

using namespace strata;
using namespace strata::kernels::cpu;

float normal(Rng& rng) {  // Box-Muller from two uniforms
  const double u1 = (double(rng.next_u64() >> 11) + 1.0) * 0x1p-53, u2 = double(rng.next_u64() >> 11) * 0x1p-53;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// A store of `capacity` slots holding, for each position in (p_max - capacity, p_max], that
// position's row (values drawn from the position, so a slot read for the wrong position shows).
std::vector<uint8_t> make_store(GgmlType t, int64_t capacity, int64_t width, int64_t p_max, uint64_t seed) {
  const size_t row_bytes = ggml_row_bytes(t, uint64_t(width));
  std::vector<uint8_t> store(size_t(capacity) * row_bytes, 0);
  std::vector<float> row(static_cast<size_t>(width));
  for (int64_t p = std::max<int64_t>(0, p_max - capacity + 1); p <= p_max; ++p) {
    Rng rng(seed, uint64_t(p));
    for (auto& x : row) x = normal(rng);
    quant_kernels(t)->quantize(row.data(), store.data() + size_t(p % capacity) * row_bytes, width);
  }
  return store;
}

struct Case {
  const char* name;
  GgmlType k, v;
  int64_t n_head, n_head_kv, head_dim, window, capacity;
  std::vector<int32_t> pos;
};

std::vector<int32_t> run(int32_t from, int32_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[size_t(i)] = from + i;
  return p;
}

}  // namespace

TEST_CASE("tiled attention equals the per-query kernel up to f32 rounding", "[attention]") {
  std::vector<int32_t> scattered;  // decode-like: positions in any order, full causal
  for (int32_t p : {700, 3, 512, 511, 999, 0, 256, 257, 640}) scattered.push_back(p);
  const std::vector<Case> cases = {
      {"f32, full causal from 0, several query and key tiles", GgmlType::F32, GgmlType::F32, 4, 2, 64, 0, 512,
       run(0, 300)},
      {"f32, a later chunk (37 queries)", GgmlType::F32, GgmlType::F32, 4, 4, 64, 0, 1024, run(500, 37)},
      {"f32, sliding window 16 in a ring of 120 slots", GgmlType::F32, GgmlType::F32, 4, 1, 64, 16, 120,
       run(260, 100)},
      {"f16, window 300 across key tiles, ring of 400", GgmlType::F16, GgmlType::F16, 8, 2, 128, 300, 400,
       run(600, 90)},
      {"q8_0 K, f16 V", GgmlType::Q8_0, GgmlType::F16, 2, 1, 64, 0, 256, run(100, 70)},
      {"q4_1 K and V, window 40", GgmlType::Q4_1, GgmlType::Q4_1, 4, 2, 32, 40, 256, run(150, 64)},
      {"f32, scattered positions", GgmlType::F32, GgmlType::F32, 2, 2, 64, 0, 1024, scattered},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const int64_t width = c.n_head_kv * c.head_dim, n_q = int64_t(c.pos.size());
    const int64_t p_max = *std::max_element(c.pos.begin(), c.pos.end());
    const auto k = make_store(c.k, c.capacity, width, p_max, 1);
    const auto v = make_store(c.v, c.capacity, width, p_max, 2);
    const KvStore kv{k.data(), v.data(), c.k, c.v, c.capacity};
    const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.window, 1.0f / std::sqrt(float(c.head_dim))};
    std::vector<float> q(size_t(n_q * c.n_head * c.head_dim));
    Rng rng(3, 4);
    for (auto& x : q) x = 2.0f * normal(rng);  // peaked enough that every key matters
    std::vector<float> want(q.size()), got(q.size(), NAN);
    attention(q.data(), c.pos.data(), n_q, kv, s, want.data());
    attention_tiled(q.data(), c.pos.data(), n_q, kv, s, got.data());
    double worst = 0;
    for (size_t i = 0; i < q.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
    CHECK(worst < 2e-5);
    CHECK(std::none_of(got.begin(), got.end(), [](float x) { return std::isnan(x); }));
  }
}

TEST_CASE("tiled attention notices a key outside the window", "[attention]") {
  // The check above is only as good as its sensitivity: widen the window by one for the tiled
  // kernel and the outputs must move far beyond the rounding bound.
  const int64_t hd = 64, capacity = 256;
  const auto pos = run(100, 40);
  const auto k = make_store(GgmlType::F32, capacity, hd, 139, 1), v = make_store(GgmlType::F32, capacity, hd, 139, 2);
  const KvStore kv{k.data(), v.data(), GgmlType::F32, GgmlType::F32, capacity};
  std::vector<float> q(size_t(40 * hd));
  Rng rng(5, 6);
  for (auto& x : q) x = 2.0f * normal(rng);
  AttentionShape s{1, 1, hd, 16, 0.125f};
  std::vector<float> want(q.size()), got(q.size());
  attention(q.data(), pos.data(), 40, kv, s, want.data());
  s.window = 17;
  attention_tiled(q.data(), pos.data(), 40, kv, s, got.data());
  double worst = 0;
  for (size_t i = 0; i < q.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
  CHECK(worst > 1e-3);
}
