// Token-tree speculative decoding (`early:d=N,tree=B`, tree_plan.h, Engine::eval_tree): greedy
// text equals plain greedy decoding on synthetic gemma3 models (rings wrap) and the testdata
// models (f32, q8_0 and q4_1 KV), with full trees (no confidence cut) and the default cut;
// sampled text equals plain sampled decoding with the same seed; the
// replay drafter's trees accept at least as much per pass as its chains on the same outcomes; the
// shaper's plans are trees within their budget that follow the measured ranks; --spec tree=B.
#include <catch2/catch.hpp>

#include "runtime/cpu_forward.h"
#include "spec/replay.h"
#include "spec/tree_plan.h"
#include "spec_test_util.h"

using namespace strata;

namespace {

std::unique_ptr<runtime::Engine> cpu_engine(const std::string& path, GgmlType kv = GgmlType::F32) {
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  auto e = runtime::CpuForward::create(*model, {.n_ctx = 256, .ubatch = 16, .k_type = kv, .v_type = kv,
                                                .placement = {}, .trace = {}});
  REQUIRE(e.is_ok());
  return std::move(*e);
}

spec::SpecConfig config(const std::string& text, uint32_t draft_max, uint32_t n_layer, float min_confidence) {
  auto c = spec::parse_spec(text, draft_max, n_layer);
  INFO(text << ": " << (c.is_ok() ? std::string() : c.message()));
  REQUIRE(c.is_ok());
  c->min_confidence = min_confidence;
  c->tree_fit_cost = false;  // the largest trees the budget allows: the most tree code exercised
  return *c;
}

// Plan invariants: parents first, depth and rank bounds, siblings in rank order without gaps.
void check_plan(const spec::TreePlan& p, uint32_t max_nodes, uint32_t max_depth, uint32_t branch) {
  REQUIRE(p.size() >= 1);
  CHECK(p.size() <= max_nodes);
  CHECK(p.parent[0] == -1);
  for (uint32_t i = 1; i < p.size(); ++i) {
    INFO("node " << i);
    REQUIRE(p.parent[i] >= 0);
    REQUIRE(uint32_t(p.parent[i]) < i);
    CHECK(p.depth[i] == p.depth[size_t(p.parent[i])] + 1);
    CHECK(p.depth[i] <= max_depth);
    CHECK(p.rank[i] < branch);
    if (p.rank[i] > 0) {  // its sibling of the rank before it is planned too
      bool found = false;
      for (uint32_t j = 1; j < p.size(); ++j) found = found || (p.parent[j] == p.parent[i] && p.rank[j] == p.rank[i] - 1);
      CHECK(found);
    }
  }
}

}  // namespace

TEST_CASE("spec flag parsing: early:d=N,tree=B", "[spec][tree]") {
  CHECK(spec::parse_spec("early:d=4,tree=2", 8, 12)->tree == 2);
  CHECK(spec::parse_spec("early:d=4,tree=2", 8, 12)->depth == 4);
  CHECK(spec::parse_spec("early:d=4,tree=2", 8, 12)->text() == "early:d=4,tree=2");
  CHECK(spec::parse_spec("early:tree=3", 8, 12)->depth == 8);
  CHECK(spec::parse_spec("early:tree=3,d=5", 8, 12)->text() == "early:d=5,tree=3");
  CHECK(spec::parse_spec("early:d=4", 8, 12)->tree == 0);
  CHECK_THAT(spec::parse_spec("early:d=4,tree=0", 8, 12).message(), Catch::Contains("tree=0 must be in [1, 8]"));
  CHECK_THAT(spec::parse_spec("early:tree=9", 8, 12).message(), Catch::Contains("tree=9 must be in [1, 8]"));
  CHECK_THAT(spec::parse_spec("early:d=4,tree=x", 8, 12).message(), Catch::Contains("expected early:d=N[,tree=B]"));
  CHECK_THAT(spec::parse_spec("auto:tree=2", 8, 12).message(), Catch::Contains("token trees need early:d=N,tree=B"));
}

TEST_CASE("tree shaper: plans are trees within budget and follow the measured ranks", "[spec][tree]") {
  spec::TreeShaper chain(1);
  const auto c = chain.plan(16, 8);
  check_plan(c, 16, 8, 1);
  CHECK(c.size() == 9);  // a chain: the root and 8 drafts
  spec::TreeShaper s(2);
  for (uint32_t budget : {1u, 2u, 7u, 16u}) check_plan(s.plan(budget, 8), budget, 8, 2);
  CHECK(s.plan(16, 8).size() == 16);
  CHECK(s.plan(16, 1).size() == 3);  // depth 1: the root's two candidates
  // The draft's second candidate is the target's at depth 1 far more often than its first: the
  // plan grows under the rank-1 node, deeper than under the rank-0 one.
  for (int i = 0; i < 200; ++i) s.observe(1, 2, 1);
  CHECK(s.p(1, 1) > 0.9);
  CHECK(s.p(1, 0) < 0.1);
  const auto p = s.plan(16, 8);
  check_plan(p, 16, 8, 2);
  auto subtree_depth = [&](uint32_t top) {
    uint32_t deepest = 0;
    for (uint32_t i = 1; i < p.size(); ++i) {
      uint32_t a = i;
      while (p.depth[a] > 1) a = uint32_t(p.parent[a]);
      if (a == top) deepest = std::max(deepest, p.depth[i]);
    }
    return deepest;
  };
  uint32_t r0 = 0, r1 = 0;
  for (uint32_t i = 1; i < p.size(); ++i)
    if (p.depth[i] == 1) (p.rank[i] == 0 ? r0 : r1) = i;
  REQUIRE(r1 > 0);
  CHECK(subtree_depth(r1) > subtree_depth(r0));
}

TEST_CASE("tree size: the prefix with the most expected tokens per second of draft and verify", "[spec][tree]") {
  spec::TreeShaper s(2);
  const auto plan = s.plan(16, 8);
  REQUIRE(plan.size() == 16);
  REQUIRE(plan.value.size() == 16);
  CHECK(plan.value[0] == 1.0);
  for (uint32_t i = 1; i < plan.size(); ++i) {
    CHECK(plan.value[i] > 0.0);
    CHECK(plan.value[i] <= plan.value[size_t(plan.parent[i])]);  // a node is accepted only after its parent
  }
  // A prefix is a tree of the first n nodes (parents come first).
  const auto p5 = plan.prefix(5);
  check_plan(p5, 5, 8, 2);
  CHECK(p5.value.size() == 5);
  const auto free_level = [](uint32_t) { return 0.0; };
  // Verification as cheap for 16 rows as for 1, drafting free: the whole plan.
  CHECK(spec::best_tree_size(plan, free_level, [](uint32_t) { return 1.0; }) == 16);
  // Every row costs a whole pass: each extra node adds a value < 1 for a full pass, so one node.
  CHECK(spec::best_tree_size(plan, free_level, [](uint32_t n) { return double(n); }) == 1);
  // In between, a pass of 1 + 0.05 per row (a GPU-like curve) keeps more than one node, and with
  // a draft level of 0.1 + 0.05 per node the chosen prefix's rate is the best of all prefixes.
  auto gpu = [](uint32_t n) { return 1.0 + 0.05 * n; };
  auto level = [](uint32_t w) { return 0.1 + 0.05 * w; };
  CHECK(spec::best_tree_size(plan, free_level, gpu) > 1);
  const uint32_t n = spec::best_tree_size(plan, level, gpu);
  auto rate = [&](uint32_t k) {
    double tokens = 0;
    std::vector<uint32_t> width;
    for (uint32_t i = 0; i < k; ++i) {
      tokens += plan.value[i];
      if (width.size() <= plan.depth[i]) width.resize(plan.depth[i] + 1, 0);
      ++width[plan.depth[i]];
    }
    double cost = gpu(k);
    for (uint32_t w : width) cost += level(w);
    return tokens / cost;
  };
  for (uint32_t k = 1; k <= plan.size(); ++k) CHECK(rate(n) >= rate(k));
}

TEST_CASE("tree size: at high acceptance, costly wide levels leave a chain", "[spec][tree]") {
  // Rank 0 right 9 times in 10 at every depth, rank 1 the other time: the best-first plan is the
  // chain first, then second candidates (worth ~0.1 of their parent). When a level's cost grows
  // with its width (more columns, a vocabulary pass per node), the second candidates do not pay
  // and only chain nodes are kept; when only depth costs, they do.
  spec::TreeShaper s(2);
  for (int round = 0; round < 200; ++round)
    for (uint32_t d = 1; d <= 8; ++d) s.observe(d, 2, round % 10 == 9 ? 1 : 0);
  const auto plan = s.plan(16, 8);
  REQUIRE(plan.size() == 16);
  for (uint32_t i = 0; i < 9; ++i) CHECK(plan.rank[i] == 0);  // the chain of depth 8 comes first
  auto verify = [](uint32_t n) { return 20.0 + 0.1 * n; };
  auto has_branch = [&](uint32_t n) {
    for (uint32_t i = 0; i < n; ++i)
      if (plan.rank[i] > 0) return true;
    return false;
  };
  const uint32_t wide = spec::best_tree_size(plan, [](uint32_t w) { return 2.5 + 1.2 * (w - 1); }, verify);
  CHECK(wide >= 7);
  CHECK_FALSE(has_branch(wide));
  const uint32_t deep = spec::best_tree_size(plan, [](uint32_t) { return 2.5; }, verify);
  CHECK(has_branch(deep));
}

TEST_CASE("tree shaper: depths not reached yet are expected to accept like the deepest measured", "[spec][tree]") {
  spec::TreeShaper sh(2);
  CHECK(sh.p(5, 0) == Approx(0.6));  // nothing measured: the prior at every depth
  // Rounds whose trees reach depth 3, accepting rank 0 nine times in ten.
  for (int round = 0; round < 60; ++round)
    for (uint32_t d = 1; d <= 3; ++d) sh.observe(d, 1, round % 10 == 9 && d == 3 ? -1 : 0);
  CHECK(sh.p(3, 0) > 0.8);
  CHECK(sh.p(6, 0) == Approx(sh.p(3, 0)));
  // So a plan deeper than the measured trees keeps growing the chain at high acceptance.
  const spec::TreePlan plan = sh.plan(9, 8);
  uint32_t deepest = 0;
  for (uint32_t i = 0; i < plan.size(); ++i) deepest = std::max(deepest, plan.depth[i]);
  CHECK(deepest == 8);
  auto level = [](uint32_t w) { return 2.35 + 0.8 * (w - 1); };
  auto verify = [](uint32_t n) { return 39.5 + 1.2 * n; };
  CHECK(spec::best_tree_size(plan, level, verify) == 9);  // the whole chain (27B-like costs, ms)
}

TEST_CASE("top_tokens: highest first, ties in index order like argmax", "[spec][tree]") {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 3.0f};
  CHECK(spec::top_tokens(l, 1) == std::vector<int32_t>{5});
  CHECK(spec::top_tokens(l, 3) == std::vector<int32_t>{5, 1, 3});
  CHECK(spec::top_tokens(l, 6) == std::vector<int32_t>{5, 1, 3, 4, 0, 2});
  CHECK(spec::top_tokens(l, 1)[0] == runtime::argmax(l));
}

TEST_CASE("token trees: greedy text equals plain greedy decoding", "[spec][tree]") {
  std::vector<std::pair<std::string, GgmlType>> cases;  // model, KV type
  for (uint64_t seed : {1, 2, 3})
    cases.emplace_back(test::small_spec_model(seed, seed == 2 ? GgmlType::F32 : GgmlType::Q8_0), GgmlType::F32);
  cases.emplace_back(test::small_spec_model(1, GgmlType::Q8_0), GgmlType::Q8_0);
  for (const char* dir : {"gemma3-swa", "gemma3-swa-q4k", "llama"})
    cases.emplace_back(test::testdata(std::string("models/") + dir + "/model.gguf"), GgmlType::F32);
  cases.emplace_back(test::testdata("models/gemma3-swa-q4k/model.gguf"), GgmlType::Q4_1);
  for (const auto& [path, kv] : cases) {
    INFO(path << " kv " << ggml_type_info(kv).name);
    auto e = cpu_engine(path, kv);
    const uint32_t n_layer = e->model().spec.hp.n_layer;
    const std::vector<int32_t> prompt = {2, 17, 40, 99, 123, 7, 250, 31};
    const uint32_t n = 70;  // past the 16-token windows: the rings wrap
    const auto plain = test::generate(*e, prompt, n, spec::SpecConfig{}, test::greedy_params());
    for (const std::string t : {"early:d=1,tree=2", "early:d=2,tree=3", "early:d=1,tree=1"}) {
      for (float conf : {0.0f, 0.2f}) {
        INFO(path << " " << t << " min_confidence " << conf);
        spec::SpecStats st;
        const auto got = test::generate(*e, prompt, n, config(t, 8, n_layer, conf), test::greedy_params(), &st);
        CHECK(got == plain);
        INFO(st.summary());
        const auto& ds = st.drafters.at(0);
        CHECK(ds.tree_rounds > 0);
        CHECK(ds.tree_rounds == ds.rounds);
        // Without a confidence cut every planned node is drafted: trees of more than a chain's
        // share of the budget when branching (B > 1 at kMaxExactRows = 16 nodes, depth <= 8).
        if (conf == 0.0f && t.find("tree=1") == std::string::npos)
          CHECK(double(ds.tree_nodes) / double(ds.tree_rounds) > 9.0);
      }
      // The default: tree size from the measured costs (smaller trees, same text).
      auto fit = config(t, 8, n_layer, 0.0f);
      fit.tree_fit_cost = true;
      spec::SpecStats st;
      CHECK(test::generate(*e, prompt, n, fit, test::greedy_params(), &st) == plain);
      CHECK(st.drafters.at(0).tree_rounds > 0);
    }
  }
}

// Sampled trees draw each emitted token from the target's distribution with the sampler's own
// generator (one draw per token, as a plain step) and walk on only where a drafted child carries
// it, so the text equals plain sampling's with the same seed, token for token. Filters and the
// repetition penalty (which depends on the path's tokens) are on in some cases.
TEST_CASE("token trees: sampled text equals plain sampled decoding with the same seed", "[spec][tree]") {
  struct Case {
    std::string path;
    float temperature, top_p, min_p, repeat_penalty;
    int32_t top_k;
    uint64_t seed;
  };
  std::vector<Case> cases;
  for (uint64_t seed : {4, 5})
    cases.push_back({test::small_spec_model(seed, GgmlType::Q8_0), 0.8f, 0.95f, 0.05f, 1.0f, 40, seed});
  cases.push_back({test::small_spec_model(6, GgmlType::F32), 1.5f, 1.0f, 0.0f, 1.1f, 0, 11});
  cases.push_back({test::testdata("models/gemma3-swa-q4k/model.gguf"), 0.7f, 0.9f, 0.02f, 1.05f, 20, 3});
  cases.push_back({test::testdata("models/llama/model.gguf"), 1.0f, 1.0f, 0.0f, 1.0f, 0, 9});
  for (const Case& c : cases) {
    runtime::SamplerParams sp;
    sp.temperature = c.temperature, sp.top_p = c.top_p, sp.min_p = c.min_p, sp.repeat_penalty = c.repeat_penalty;
    sp.top_k = c.top_k, sp.seed = c.seed;
    auto e = cpu_engine(c.path);
    const uint32_t n_layer = e->model().spec.hp.n_layer;
    const std::vector<int32_t> prompt = {2, 17, 40, 99, 123, 7};
    const uint32_t n = 60;
    const auto plain = test::generate(*e, prompt, n, spec::SpecConfig{}, sp);
    for (const std::string t : {"early:d=1,tree=2", "early:d=2,tree=3"}) {
      INFO(c.path << " " << t << " temperature " << c.temperature << " seed " << c.seed);
      spec::SpecStats st;
      const auto got = test::generate(*e, prompt, n, config(t, 6, n_layer, 0.0f), sp, &st);
      CHECK(got == plain);
      INFO(st.summary());
      const auto& ds = st.drafters.at(0);
      CHECK(ds.tree_rounds > 0);
      CHECK(ds.tree_rounds == ds.rounds);
    }
  }
  // A different seed gives a different text (the check above is not vacuous: the runs sample).
  runtime::SamplerParams a, b;
  a.temperature = b.temperature = 1.0f, a.top_k = b.top_k = 0, a.top_p = b.top_p = 1.0f, a.min_p = b.min_p = 0.0f;
  a.seed = 1, b.seed = 2;
  auto e = cpu_engine(test::small_spec_model(4, GgmlType::Q8_0));
  CHECK(test::generate(*e, {2, 17, 40}, 40, spec::SpecConfig{}, a) !=
        test::generate(*e, {2, 17, 40}, 40, spec::SpecConfig{}, b));
}

TEST_CASE("replay: trees accept at least as many tokens per pass as chains on the same outcomes", "[spec][tree]") {
  auto e = cpu_engine(test::small_spec_model(7, GgmlType::Q8_0));
  const uint32_t n_vocab = e->model().spec.hp.n_vocab;
  const std::vector<int32_t> prompt = {2, 17, 40, 99, 123, 7, 250};
  const uint32_t n = 160;
  const auto plain = test::generate(*e, prompt, n, spec::SpecConfig{}, test::greedy_params());
  std::vector<int32_t> ref = prompt;
  ref.insert(ref.end(), plain.begin(), plain.end());
  // Runs the replay at acceptance a; tree 0: chains. fit: trees sized by measured costs.
  auto run = [&](double a, uint32_t tree, bool fit) {
    INFO("A " << a << " tree " << tree << " fit " << fit);
    runtime::Sampler sampler(test::greedy_params(), n_vocab);
    for (int32_t t : prompt) sampler.accept(t);
    auto drafter = std::make_unique<spec::ReplayDrafter>(ref, a, 9, n_vocab);
    auto dec = spec::SpeculativeDecoder::create_with(*e, sampler, 8, std::move(drafter), tree, fit);
    REQUIRE(dec.is_ok());
    auto first = (*dec)->start(prompt);
    REQUIRE(first.is_ok());
    std::vector<int32_t> out{*first};
    while (out.size() < n) REQUIRE((*dec)->step(uint32_t(n - out.size()), out).is_ok());
    CHECK(out == plain);
    INFO((*dec)->stats().summary());
    const auto ds = (*dec)->stats().drafters.at(0);
    CHECK((ds.tree_rounds > 0) == (tree > 0));
    return ds;
  };
  for (const double a : {0.3, 0.5, 0.7}) {
    // The budget's whole trees (no cost fit), so both take the same outcomes' best.
    const double chain = run(a, 0, false).mean_accepted(), tree = run(a, 2, false).mean_accepted();
    INFO("A " << a << ": chain " << chain << " tree " << tree << " accepted per pass");
    CHECK(tree >= chain);
  }
  // Sized by measured costs (replayed trees are verified from layer 0, their levels timed as a
  // whole): the same text. How small the trees get depends on this machine's timings (on an idle
  // CPU well short of the 16-node budget, under load sometimes not), so it is not asserted here;
  // `strata bench spec --replay-tree` reports the sizes.
  const auto fitted = run(0.7, 2, true);
  CHECK(fitted.tree_rounds > 0);
}
