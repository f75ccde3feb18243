// The draft attention window (runtime/draft_window.h, spec/draft_window_config.h): a windowed
// eval_layers / eval_tree changes the draft's logits once the window cuts keys of a
// full-attention layer, never moves n_past, and speculative decoding through it (verified from
// layer 0) gives exactly the text of plain greedy decoding, for every self-drafter.
#include <catch2/catch.hpp>

#include <algorithm>

#include <fmt/format.h>

#include "core/rng.h"
#include "runtime/cpu_forward.h"
#include "spec/early_exit.h"
#include "spec_test_util.h"

using namespace strata;

namespace {

// test::small_spec_model with every second layer full-attention (layers 1 and 3), so that an
// early exit at d = 2 drafts through one.
std::string window_model(uint64_t seed, GgmlType type) { return test::small_spec_model(seed, type, 2); }

std::unique_ptr<runtime::Engine> cpu_engine(const std::string& path, uint32_t n_ctx, uint32_t ubatch,
                                            GgmlType kv = GgmlType::F32) {
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  auto e = runtime::CpuForward::create(*model, {.n_ctx = n_ctx, .ubatch = ubatch, .k_type = kv, .v_type = kv,
                                                .placement = {}, .trace = {}});
  REQUIRE(e.is_ok());
  return std::move(*e);
}

std::vector<int32_t> random_tokens(size_t n, uint32_t n_vocab, Rng& rng) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng.next_u32() % n_vocab);
  return t;
}

spec::SpecConfig with_window(const std::string& mode, const std::string& window, uint32_t draft_max, uint32_t n_layer) {
  auto c = spec::parse_spec(mode, draft_max, n_layer);
  REQUIRE(c.is_ok());
  auto w = spec::parse_draft_window(window);
  REQUIRE(w.is_ok());
  c->window = *w;
  return *c;
}

}  // namespace

TEST_CASE("draft window: --draft-window parsing and when a round drafts through it", "[spec]") {
  CHECK(spec::parse_draft_window("auto")->text() == "auto");
  CHECK(spec::parse_draft_window("off")->text() == "off");
  CHECK(spec::parse_draft_window("64,4096")->text() == "64,4096");
  CHECK(spec::parse_draft_window("0,16")->window == runtime::DraftWindow{0, 16});
  CHECK(spec::parse_draft_window("4,8").message().find("at least 16") != std::string::npos);
  CHECK(spec::parse_draft_window("4").message().find("expected SINKS,RECENT") != std::string::npos);
  CHECK(spec::parse_draft_window("a,b").message().find("expected SINKS,RECENT") != std::string::npos);
  CHECK(spec::parse_draft_window("4,64x").message().find("expected SINKS,RECENT") != std::string::npos);

  const auto fixed = *spec::parse_draft_window("4,64");
  CHECK(!fixed.at(67).on());  // 68 keys: all of them seen (4 sinks + 64 recent)
  CHECK(fixed.at(68) == runtime::DraftWindow{4, 64});
  CHECK(!spec::parse_draft_window("off")->at(1u << 20).on());
  const auto automatic = *spec::parse_draft_window("auto");
  CHECK(!automatic.at(spec::DraftWindowConfig::kAutoFromContext - 2).on());
  CHECK(automatic.at(spec::DraftWindowConfig::kAutoFromContext - 1) ==
        runtime::DraftWindow{spec::DraftWindowConfig::kAutoSinks, spec::DraftWindowConfig::kAutoRecent});
}

TEST_CASE("eval_layers with a draft window: new draft logits past the window, never a moved n_past", "[spec]") {
  const std::string path = window_model(21, GgmlType::Q8_0);
  for (const GgmlType kv : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    INFO("KV " << ggml_type_info(kv).name);
    auto e = cpu_engine(path, 256, 16, kv);
    Rng rng(5);
    const auto prompt = random_tokens(150, e->model().spec.hp.n_vocab, rng);
    std::vector<float> l;
    REQUIRE(e->eval(prompt, runtime::Logits::last, l).is_ok());
    const uint32_t pos = e->n_past();
    const std::vector<int32_t> next = {7, 8, 9};
    const uint32_t d = 2;  // layers 0 (sliding) and 1 (full attention)
    auto draft = [&](runtime::DraftWindow w) {
      std::vector<float> out;
      const runtime::LayerRange r{.first = 0, .end = d, .hidden_in = nullptr, .hidden_out = nullptr, .skip = {},
                                  .window = w};
      REQUIRE(e->eval_layers(next, pos, r, runtime::Logits::all, out).is_ok());
      CHECK(e->n_past() == pos);
      return out;
    };
    const auto full = draft({});
    CHECK(draft({4, 32}) != full);     // cuts positions 4 .. pos - 32 of layer 1
    CHECK(draft({0, 64}) != full);     // a plain sliding window
    CHECK(draft({4, 200}) == full);    // cuts nothing: no window, bit for bit
    // Over every layer a window is still a draft: n_past stays, and the full pass that follows
    // overwrites its KV (the verified logits are the unwindowed ones).
    std::vector<float> windowed, verified, want;
    REQUIRE(e->eval_layers(next, pos, {.window = {4, 32}}, runtime::Logits::all, windowed).is_ok());
    CHECK(e->n_past() == pos);
    REQUIRE(e->eval_layers(next, pos, {}, runtime::Logits::all, verified).is_ok());
    CHECK(e->n_past() == pos + next.size());
    CHECK(windowed != verified);
    auto ref = cpu_engine(path, 256, 16, kv);
    REQUIRE(ref->eval(prompt, runtime::Logits::last, l).is_ok());
    REQUIRE(ref->eval_layers(next, pos, {}, runtime::Logits::all, want).is_ok());
    CHECK(verified == want);
    // Errors: a window narrower than a draft pass's rows, sinks without a window.
    CHECK(e->eval_layers(next, e->n_past(), {.window = {4, 8}}, runtime::Logits::none, l).message().find("at least 16") !=
          std::string::npos);
    CHECK(e->eval_layers(next, e->n_past(), {.window = {4, 0}}, runtime::Logits::none, l).message().find("sinks") !=
          std::string::npos);
  }
}

TEST_CASE("eval_tree with a draft window: a chain is eval_layers' windowed chain, bit for bit", "[spec][tree]") {
  const std::string path = window_model(22, GgmlType::Q8_0);
  auto chain = cpu_engine(path, 256, 16), tree = cpu_engine(path, 256, 16);
  Rng rng(6);
  const auto prompt = random_tokens(120, chain->model().spec.hp.n_vocab, rng);
  std::vector<float> l;
  REQUIRE(chain->eval(prompt, runtime::Logits::last, l).is_ok());
  REQUIRE(tree->eval(prompt, runtime::Logits::last, l).is_ok());
  const uint32_t pos = chain->n_past();
  const std::vector<int32_t> next = {3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> parents = {-1, 0, 1, 2, 3, 4};
  const runtime::LayerRange r{.first = 0, .end = 3, .hidden_in = nullptr, .hidden_out = nullptr, .skip = {},
                              .window = {2, 40}};
  std::vector<float> a, b;
  REQUIRE(chain->eval_layers(next, pos, r, runtime::Logits::all, a).is_ok());
  REQUIRE(tree->eval_tree(next, parents, pos, r, runtime::Logits::all, b).is_ok());
  CHECK(a == b);
  // A branch: node 3 is a second child of node 1 at depth 2, so its window starts where a token at
  // pos + 2 starts -- its logits are node 2's when its token is node 2's.
  const std::vector<int32_t> branched = {3, 4, 5, 5};
  const std::vector<int32_t> bp = {-1, 0, 1, 1};
  tree->truncate(pos);
  REQUIRE(tree->eval_tree(branched, bp, pos, r, runtime::Logits::all, b).is_ok());
  const size_t V = tree->model().spec.hp.n_vocab;
  CHECK(std::equal(b.begin() + 2 * V, b.begin() + 3 * V, b.begin() + 3 * V));
  CHECK(std::equal(a.begin() + 2 * V, a.begin() + 3 * V, b.begin() + 3 * V));
}

TEST_CASE("early exit through a draft window verifies from layer 0, and only past the window", "[spec]") {
  const std::string path = window_model(23, GgmlType::Q8_0);
  auto e = cpu_engine(path, 256, 16);
  Rng rng(7);
  const auto prompt = random_tokens(30, e->model().spec.hp.n_vocab, rng);
  std::vector<float> l;
  REQUIRE(e->eval(prompt, runtime::Logits::last, l).is_ok());
  spec::EarlyExit ee(*e, 2, 0.0f, *spec::parse_draft_window("4,32"));
  spec::Draft d;
  std::vector<int32_t> history = prompt;
  history.push_back(1);  // the pending token, at position n_past = 30
  REQUIRE(ee.propose(history, 6, d).is_ok());  // drafts at 30 .. 35 see all of 4 sinks + 32 recent
  CHECK(!d.windowed);
  CHECK(d.verify_from == 2);
  CHECK(d.hidden.size() == 7 * e->model().spec.hp.n_embd);
  CHECK(d.engine_steps == 7);  // and a pass for the last draft's stream at layer 2
  REQUIRE(ee.propose(history, 7, d).is_ok());  // the draft at 36 does not see key 4
  CHECK(d.windowed);
  CHECK(d.verify_from == 0);
  CHECK(d.hidden.empty());
  CHECK(d.engine_steps == 7);  // no extra pass for the last draft's stream
  CHECK(e->n_past() == 30);
}

TEST_CASE("greedy speculative decoding through a draft window equals plain greedy decoding", "[spec]") {
  const std::vector<std::string> modes = {"early:d=2", "early:d=3", "subset", "auto:d=2", "early:d=2,tree=2"};
  for (auto [seed, type] : {std::pair{31u, GgmlType::Q8_0}, std::pair{32u, GgmlType::F32}}) {
    const std::string path = window_model(seed, type);
    for (const GgmlType kv : {GgmlType::F32, GgmlType::Q4_1}) {
      auto e = cpu_engine(path, 320, 16, kv);
      const uint32_t n_layer = e->model().spec.hp.n_layer, n_vocab = e->model().spec.hp.n_vocab;
      Rng rng(seed);
      for (int p = 0; p < 4; ++p) {
        std::vector<int32_t> prompt = random_tokens(20 + rng.next_u32() % 80, n_vocab, rng);
        for (size_t i = 8; i < prompt.size(); i += 3) prompt[i] = prompt[i - 8];  // some repeats to accept
        const uint32_t n = 60 + rng.next_u32() % 40;
        const auto want = test::generate(*e, prompt, n, spec::SpecConfig{}, test::greedy_params());
        for (const auto& m : modes) {
          for (const std::string window : {"0,16", "4,32", "16,48"}) {
            INFO("seed " << seed << " KV " << ggml_type_info(kv).name << " prompt " << p << " (" << prompt.size()
                         << " tokens) mode " << m << " window " << window);
            spec::SpecStats st;
            const auto got = test::generate(*e, prompt, n, with_window(m, window, 6, n_layer), test::greedy_params(), &st);
            CHECK(got == want);
            CHECK(st.draft_window == window);
            uint64_t windowed = 0;
            for (const auto& ds : st.drafters) windowed += ds.windowed_rounds;
            if (m != "auto:d=2") CHECK(windowed > 0);  // auto may choose plain steps throughout
          }
        }
      }
    }
  }
}
