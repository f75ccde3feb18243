// The replay drafter of `bench spec --replay` (spec/replay.h): per-position Bernoulli(A) outcomes,
// wrong tokens never equal the right ones, and through the speculative decoder the text stays plain
// greedy decoding's at any acceptance, with every round's accepted count what the outcomes allow.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/cpu_forward.h"
#include "spec/early_exit.h"
#include "spec/replay.h"
#include "spec_test_util.h"

using namespace strata;

TEST_CASE("replay drafter: outcomes are Bernoulli(A) per position, wrong tokens differ from the right ones", "[spec]") {
  std::vector<int32_t> ref(20000);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = int32_t((i * 7919) % 1000);
  for (const double a : {0.0, 0.3, 0.7, 1.0}) {
    spec::ReplayDrafter d(ref, a, 42, 1000);
    size_t right = 0;
    for (size_t p = 0; p < ref.size(); ++p) right += d.right_at(p);
    const double n = double(ref.size()), sigma = std::sqrt(n * a * (1 - a));
    INFO("a " << a << " right " << right);
    CHECK(std::abs(double(right) - n * a) <= 5 * sigma + 0.5);
    // Drafts after a 100-token history: right where right_at says, else another token.
    spec::Draft out;
    REQUIRE(d.propose(std::span(ref.data(), 100), 12, out).is_ok());
    REQUIRE(out.tokens.size() == 12);
    CHECK(out.verify_from == 0);
    for (size_t i = 0; i < 12; ++i) {
      CHECK((out.tokens[i] == ref[100 + i]) == d.right_at(100 + i));
      CHECK(out.tokens[i] >= 0);
      CHECK(out.tokens[i] < 1000);
    }
  }
  spec::ReplayDrafter d(ref, 1.0, 1, 1000);
  spec::Draft out;
  REQUIRE(d.propose(std::span(ref.data(), ref.size() - 3), 8, out).is_ok());
  CHECK(out.tokens.size() == 3);  // the reference ends
  std::vector<int32_t> off(ref.begin(), ref.begin() + 50);
  off[10] += 1;  // history left the reference: nothing to replay
  REQUIRE(d.propose(off, 8, out).is_ok());
  CHECK(out.tokens.empty());
  // Another seed gives other outcomes (not a constant pattern).
  spec::ReplayDrafter e(ref, 0.5, 2, 1000), f(ref, 0.5, 3, 1000);
  size_t differ = 0;
  for (size_t p = 0; p < 1000; ++p) differ += e.right_at(p) != f.right_at(p);
  CHECK(differ > 300);
}

namespace {

// A small CPU engine, a prompt, the plain greedy continuation of n tokens and the replay reference
// (prompt + that continuation).
struct ReplaySetup {
  std::unique_ptr<runtime::CpuForward> engine;
  std::vector<int32_t> prompt = {2, 17, 40, 99, 123, 7, 250};
  std::vector<int32_t> plain, ref;
  explicit ReplaySetup(uint32_t n) {
    auto model = runtime::Model::load(test::small_spec_model(7, GgmlType::Q8_0));
    REQUIRE(model.is_ok());
    auto eng = runtime::CpuForward::create(*model, {.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F32,
                                                    .v_type = GgmlType::F32, .placement = {}, .trace = {}});
    REQUIRE(eng.is_ok());
    engine = std::move(*eng);
    plain = test::generate(*engine, prompt, n, spec::SpecConfig{}, test::greedy_params());
    ref = prompt;
    ref.insert(ref.end(), plain.begin(), plain.end());
  }
};

// An engine whose passes advance a modelled clock: 10 ms per pass over all layers plus 30% per
// extra row, scaled by the layers run. The decoder timed by it (SpeculativeDecoder::set_clock)
// chooses by these costs, whatever the load on the machine running the test.
class ModelledCostEngine final : public runtime::Engine {
 public:
  explicit ModelledCostEngine(runtime::Engine& e) : e_(e) {}
  double seconds() const { return t_; }
  using Engine::eval;
  using Engine::n_past;
  using Engine::truncate;
  Status eval(uint32_t seq, std::span<const int32_t> tokens, runtime::Logits which,
              std::vector<float>& logits) override {
    pass(tokens.size(), 1.0);
    return e_.eval(seq, tokens, which, logits);
  }
  Status eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const runtime::LayerRange& r,
                     runtime::Logits which, std::vector<float>& logits) override {
    const double L = e_.model().spec.hp.n_layer, end = r.end ? r.end : L;
    pass(tokens.size(), (end - r.first) / L);
    return e_.eval_layers(tokens, pos0, r, which, logits);
  }
  Status eval_batch(std::span<const runtime::BatchRow> rows, std::vector<float>& logits) override {
    pass(rows.size(), 1.0);
    return e_.eval_batch(rows, logits);
  }
  uint32_t n_seq() const override { return e_.n_seq(); }
  uint32_t n_past(uint32_t seq) const override { return e_.n_past(seq); }
  void truncate(uint32_t seq, uint32_t n) override { e_.truncate(seq, n); }
  uint64_t kv_bytes_per_seq() const override { return e_.kv_bytes_per_seq(); }
  uint32_t n_ctx() const override { return e_.n_ctx(); }
  uint32_t ubatch() const override { return e_.ubatch(); }
  const runtime::Model& model() const override { return e_.model(); }
  std::string_view device_name() const override { return e_.device_name(); }
  int32_t last_argmax() const override { return e_.last_argmax(); }

 private:
  void pass(size_t rows, double layer_share) { t_ += 0.010 * (1.0 + 0.3 * (double(rows) - 1.0)) * layer_share; }
  runtime::Engine& e_;
  double t_ = 0;
};

}  // namespace

TEST_CASE("replay through the speculative decoder: plain greedy text at every acceptance", "[spec]") {
  const uint32_t n = 60;
  ReplaySetup rs(n);
  auto& e = *rs.engine;
  const auto &prompt = rs.prompt, &plain = rs.plain, &ref = rs.ref;
  for (const double a : {0.0, 0.5, 1.0}) {
    for (const bool with_cost : {false, true}) {
      runtime::Sampler sampler(test::greedy_params(), e.model().spec.hp.n_vocab);
      for (int32_t t : prompt) sampler.accept(t);
      std::unique_ptr<spec::Drafter> inner;
      if (with_cost) inner = std::make_unique<spec::EarlyExit>(e, 2, 0.0f);
      auto drafter = std::make_unique<spec::ReplayDrafter>(ref, a, 9, e.model().spec.hp.n_vocab, std::move(inner));
      const spec::ReplayDrafter& rd = *drafter;
      auto dec = spec::SpeculativeDecoder::create_with(e, sampler, 6, std::move(drafter));
      REQUIRE(dec.is_ok());
      auto first = (*dec)->start(prompt);
      REQUIRE(first.is_ok());
      std::vector<int32_t> out{*first};
      uint64_t expect_accepted = 0;
      while (out.size() < n) {
        // The round's drafts start at the next position; it accepts the run of right outcomes.
        const size_t next = prompt.size() + out.size();
        const uint32_t k = std::min<uint32_t>(6, uint32_t(n - out.size()) - 1);
        for (size_t p = next; p < next + k && p < ref.size() && rd.right_at(p); ++p) ++expect_accepted;
        REQUIRE((*dec)->step(uint32_t(n - out.size()), out).is_ok());
      }
      INFO("a " << a << " cost " << with_cost);
      CHECK(out == plain);
      const auto& st = (*dec)->stats();
      REQUIRE(st.drafters.size() == 1);
      CHECK(st.drafters[0].accepted == expect_accepted);
      if (a == 1.0) CHECK(st.drafters[0].accepted == st.drafters[0].drafted);
      if (a == 0.0) CHECK(st.drafters[0].accepted == 0);
      if (with_cost) CHECK(st.drafters[0].steps > 0);  // the early-exit passes ran
      else CHECK(st.drafters[0].steps == 0);
    }
  }
}

// --replay-policy auto (SpecConfig::replay_auto): chains choose their length by auto's rule, so at
// acceptance 0 the decoder backs off to plain steps after the first rejections (and probes now and
// then), where the fixed policy verifies a wasted draft every round; at acceptance 1 every drafted
// token is accepted. The text is plain greedy decoding's either way.
TEST_CASE("replay with auto's policy backs off to plain steps at acceptance 0, same text", "[spec]") {
  const uint32_t n = 80;
  ReplaySetup rs(n);
  // Costs modelled, not measured (a verify of k + 1 rows: 1 + 0.3 k plain steps), so the back-off
  // below does not depend on this machine's load.
  ModelledCostEngine e(*rs.engine);
  const auto &prompt = rs.prompt, &plain = rs.plain, &ref = rs.ref;
  auto run = [&](double a, bool adaptive) {
    runtime::Sampler sampler(test::greedy_params(), e.model().spec.hp.n_vocab);
    for (int32_t t : prompt) sampler.accept(t);
    auto drafter = std::make_unique<spec::ReplayDrafter>(ref, a, 9, e.model().spec.hp.n_vocab);
    auto dec = spec::SpeculativeDecoder::create_with(e, sampler, 6, std::move(drafter), 0, true, adaptive);
    REQUIRE(dec.is_ok());
    (*dec)->set_clock([&e] { return e.seconds(); });
    auto first = (*dec)->start(prompt);
    REQUIRE(first.is_ok());
    std::vector<int32_t> out{*first};
    while (out.size() < n) REQUIRE((*dec)->step(uint32_t(n - out.size()), out).is_ok());
    INFO("a " << a << " adaptive " << adaptive);
    CHECK(out == plain);
    return (*dec)->stats();
  };
  const spec::SpecStats fixed0 = run(0.0, false), auto0 = run(0.0, true), auto1 = run(1.0, true);
  CHECK(fixed0.plain_steps <= 1);        // the last token, with no room for a draft
  CHECK(fixed0.verify_passes >= n - 3);  // one token per wasted round
  // auto: a plain step to measure, a few rounds until the estimate falls, probes after 32 idle rounds.
  CHECK(auto0.drafters[0].accepted == 0);
  CHECK(auto0.verify_passes <= 8);
  CHECK(auto0.plain_steps >= n - 1 - auto0.verify_passes);
  CHECK(auto1.drafters[0].accepted == auto1.drafters[0].drafted);
}
