// Acceptance per draft depth (spec/depth_stats.h): hand-counted passes, then the counters the
// speculative decoder keeps, checked round by round against a replay drafter whose every
// outcome is known in advance (acceptance 0, 0.5 and 1).
#include <catch2/catch.hpp>

#include "runtime/cpu_forward.h"
#include "spec/depth_stats.h"
#include "spec/replay.h"
#include "spec_test_util.h"

using namespace strata;

TEST_CASE("depth stats: a pass reaches the depths up to its first rejection", "[spec]") {
  spec::DepthStats d;
  CHECK(d.max_depth() == 0);
  d.observe(4, 2);  // depths 1, 2 accepted, 3 rejected, 4 never judged
  d.observe(4, 4);  // all four accepted
  d.observe(2, 0);  // depth 1 rejected
  d.observe(6, 1);  // depth 1 accepted, 2 rejected
  d.observe(0, 0);  // nothing drafted: no depth reached
  REQUIRE(d.max_depth() == 4);
  const uint64_t reached[] = {4, 3, 2, 1}, accepted[] = {3, 2, 1, 1};
  for (size_t i = 1; i <= 4; ++i) {
    INFO("depth " << i);
    CHECK(d.reached(i) == reached[i - 1]);
    CHECK(d.accepted(i) == accepted[i - 1]);
    CHECK(d.rate(i) == Approx(double(accepted[i - 1]) / double(reached[i - 1])));
  }
  CHECK(d.reached(5) == 0);
  CHECK(d.rate(5) == 0.0);
  CHECK(d.reached(0) == 0);
  const auto j = d.to_json();
  REQUIRE(j.size() == 4);
  CHECK(j[2]["depth"] == 3);
  CHECK(j[2]["reached"] == 2);
  CHECK(j[2]["accepted"] == 1);
  CHECK(j[2]["rate"].get<double>() == Approx(0.5));
  CHECK(d.text().rfind("d1 0.75 (4) d2 0.67 (3)", 0) == 0);
}

TEST_CASE("depth stats through the speculative decoder match the replay drafter's outcomes", "[spec]") {
  const std::string path = test::small_spec_model(11, GgmlType::Q8_0);
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  auto eng = runtime::CpuForward::create(*model, {.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F32,
                                                  .v_type = GgmlType::F32, .placement = {}, .trace = {}});
  REQUIRE(eng.is_ok());
  auto& e = **eng;
  const std::vector<int32_t> prompt = {2, 31, 64, 5, 200, 77};
  const uint32_t n = 70, k_max = 6;
  const auto plain = test::generate(e, prompt, n, spec::SpecConfig{}, test::greedy_params());
  std::vector<int32_t> ref = prompt;
  ref.insert(ref.end(), plain.begin(), plain.end());
  for (const double a : {0.0, 0.5, 1.0}) {
    INFO("acceptance " << a);
    runtime::Sampler sampler(test::greedy_params(), e.model().spec.hp.n_vocab);
    for (int32_t t : prompt) sampler.accept(t);
    auto drafter = std::make_unique<spec::ReplayDrafter>(ref, a, 5, e.model().spec.hp.n_vocab);
    const spec::ReplayDrafter& rd = *drafter;
    auto dec = spec::SpeculativeDecoder::create_with(e, sampler, k_max, std::move(drafter));
    REQUIRE(dec.is_ok());
    auto first = (*dec)->start(prompt);
    REQUIRE(first.is_ok());
    std::vector<int32_t> out{*first};
    // Expected counts per depth, from the outcomes each round's drafts will have.
    std::vector<uint64_t> reached(k_max, 0), accepted(k_max, 0);
    uint64_t rounds = 0, emitted = 0;
    while (out.size() < n) {
      const size_t next = prompt.size() + out.size();
      const uint32_t k = std::min<uint32_t>(k_max, uint32_t(n - out.size()) - 1);
      const size_t before = out.size();
      if (k > 0) {
        ++rounds;
        for (uint32_t i = 0; i < k; ++i) {
          ++reached[i];
          if (!rd.right_at(next + i)) break;
          ++accepted[i];
        }
      }
      REQUIRE((*dec)->step(uint32_t(n - out.size()), out).is_ok());
      if (k > 0) emitted += out.size() - before;
    }
    CHECK(out == plain);
    const auto& st = (*dec)->stats();
    REQUIRE(st.drafters.size() == 1);
    const auto& ds = st.drafters[0];
    CHECK(ds.rounds == rounds);
    const auto& bd = ds.by_depth;
    for (size_t i = 1; i <= k_max; ++i) {
      INFO("depth " << i);
      CHECK(bd.reached(i) == reached[i - 1]);
      CHECK(bd.accepted(i) == accepted[i - 1]);
    }
    // Accepted drafts are the accepted counts summed over depths; tokens add one per pass.
    uint64_t sum = 0;
    for (size_t i = 1; i <= bd.max_depth(); ++i) sum += bd.accepted(i);
    CHECK(sum == ds.accepted);
    CHECK(ds.tokens == emitted);
    CHECK(ds.mean_accepted() == Approx(double(ds.accepted) / double(rounds)));
    CHECK(ds.tokens_per_verify() == Approx(1.0 + ds.mean_accepted()));
    if (a == 0.0) {
      CHECK(bd.max_depth() == 1);  // every pass stops at its first draft
      CHECK(bd.reached(1) == rounds);
      CHECK(bd.rate(1) == 0.0);
    }
    if (a == 1.0) {
      CHECK(bd.max_depth() == k_max);
      for (size_t i = 1; i <= k_max; ++i) CHECK(bd.rate(i) == 1.0);
      CHECK(bd.reached(1) == rounds);
      CHECK(bd.reached(k_max) < rounds);  // the last, shorter rounds reach fewer depths
    }
    if (a == 0.5) {
      CHECK(bd.rate(1) > 0.2);
      CHECK(bd.rate(1) < 0.8);
      CHECK(bd.reached(2) < bd.reached(1));
    }
    const auto j = st.to_json();
    REQUIRE(j["drafters"][0].contains("acceptance_by_depth"));
    CHECK(j["drafters"][0]["acceptance_by_depth"].size() == bd.max_depth());
  }
}
