// Token trees on the CPU engine (Engine::eval_tree / keep_tree_path, runtime/token_tree.h): a
// chain tree is eval_layers bit for bit; every root-to-leaf path of a random tree (several roots,
// positions != slots) gives the logits of that path evaluated alone as a chain; after
// keep_tree_path, decoding on equals a run that only ever saw that path. On the testdata models
// (gemma3's sliding-window rings wrap), a synthetic gemma3 whose window (4) is shorter than the
// tree's depth, and with q8_0 / q4_1 KV. Also the errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <span>

#include "core/rng.h"
#include "runtime/batch_test_util.h"
#include "runtime/cpu_forward.h"
#include "runtime/tree_test_util.h"
#include "spec/spec_test_util.h"
#include "test_util.h"

using namespace strata;
using test::narrow_window_model;
using test::path_to;
using test::random_parents;
using test::random_prompt;
using test::row;
using test::same_bits;

namespace {

std::unique_ptr<runtime::CpuForward> engine(const std::string& path, GgmlType kv = GgmlType::F32, uint32_t n_ctx = 160,
                                            uint32_t ubatch = 16) {
  auto model = runtime::Model::load(path);
  INFO((model.is_ok() ? std::string() : model.message()));
  REQUIRE(model.is_ok());
  runtime::ForwardOptions o{.n_ctx = n_ctx, .ubatch = ubatch, .k_type = kv, .v_type = kv, .placement = {}, .trace = {}};
  auto e = runtime::CpuForward::create(*model, o);
  INFO((e.is_ok() ? std::string() : e.message()));
  REQUIRE(e.is_ok());
  return std::move(*e);
}

struct Case {
  std::string path;
  GgmlType kv;
};

std::vector<Case> cases() {
  const std::string m = test::testdata("models/");
  return {{m + "gemma3-swa/model.gguf", GgmlType::F32},   {m + "gemma3-swa-q4k/model.gguf", GgmlType::Q8_0},
          {m + "gemma3-swa-q4k/model.gguf", GgmlType::Q4_1}, {m + "llama/model.gguf", GgmlType::F32},
          {narrow_window_model(), GgmlType::F32},          {test::small_spec_model(5, GgmlType::Q8_0), GgmlType::Q8_0}};
}

}  // namespace

TEST_CASE("eval_tree: a chain tree equals eval_layers bit for bit", "[runtime][tree]") {
  for (const auto& c : cases()) {
    INFO(c.path << " kv " << ggml_type_info(c.kv).name);
    auto a = engine(c.path, c.kv), b = engine(c.path, c.kv);
    const uint32_t n_vocab = a->model().spec.hp.n_vocab;
    Rng rng(21);
    // 37 tokens: past the 16-token windows, so the rings have wrapped.
    const auto prompt = random_prompt(rng, 37, n_vocab), chain = random_prompt(rng, 16, n_vocab);
    std::vector<float> la, lb;
    REQUIRE(a->eval(prompt, runtime::Logits::last, la).is_ok());
    REQUIRE(b->eval(prompt, runtime::Logits::last, lb).is_ok());
    std::vector<int32_t> parents(chain.size());
    for (size_t i = 0; i < parents.size(); ++i) parents[i] = int32_t(i) - 1;
    REQUIRE(a->eval_layers(chain, 37, {}, runtime::Logits::all, la).is_ok());
    Status s = b->eval_tree(chain, parents, 37, {}, runtime::Logits::all, lb);
    INFO(s.message());
    REQUIRE(s.is_ok());
    CHECK(b->n_past() == 37);  // a tree commits nothing by itself
    CHECK(same_bits(la, lb));
  }
}

TEST_CASE("eval_tree: every root-to-leaf path gives the logits of that path evaluated as a chain",
          "[runtime][tree]") {
  for (const auto& c : cases()) {
    INFO(c.path << " kv " << ggml_type_info(c.kv).name);
    auto tree = engine(c.path, c.kv), ref = engine(c.path, c.kv);
    const uint32_t n_vocab = tree->model().spec.hp.n_vocab;
    const uint64_t seed = test::fresh_seed();
    INFO("seed " << seed);
    Rng rng(seed);
    for (int round = 0; round < 3; ++round) {
      const auto prompt = random_prompt(rng, 20 + rng.next_u32() % 30, n_vocab);
      const uint32_t n_random = 6 + rng.next_u32() % 11;  // 6 .. 16 nodes
      auto parents = random_parents(rng, n_random);
      // Round 0: two interleaved chains (node i's parent i - 2), 16 nodes, depth 8 at index 15:
      // nodes whose slots are far from their positions, deeper than the narrow model's window.
      if (round == 0) {
        parents.assign(16, 0);
        parents[0] = -1;
        for (int32_t i = 3; i < 16; ++i) parents[size_t(i)] = i - 2;
      }
      const uint32_t n = uint32_t(parents.size());
      const auto tokens = random_prompt(rng, n, n_vocab);
      const uint32_t pos0 = uint32_t(prompt.size());
      std::vector<float> lt, lr;
      tree->truncate(0);
      REQUIRE(tree->eval(prompt, runtime::Logits::last, lt).is_ok());
      // Drafted level by level, as a drafter does: the first half, then the rest.
      const std::span<const int32_t> all(parents);
      const uint32_t half = n / 2;
      std::vector<float> first_half;
      REQUIRE(tree->eval_tree(std::span(tokens).first(half), all.first(half), pos0, {}, runtime::Logits::all,
                              first_half)
                  .is_ok());
      REQUIRE(tree->eval_tree(std::span(tokens).subspan(half), all, pos0, {}, runtime::Logits::all, lt).is_ok());
      lt.insert(lt.begin(), first_half.begin(), first_half.end());
      for (uint32_t leaf = 0; leaf < n; ++leaf) {
        if (std::find(parents.begin(), parents.end(), int32_t(leaf)) != parents.end()) continue;
        const auto path = path_to(parents, leaf);
        std::vector<int32_t> chain;
        for (uint32_t j : path) chain.push_back(tokens[j]);
        ref->truncate(0);
        REQUIRE(ref->eval(prompt, runtime::Logits::last, lr).is_ok());
        REQUIRE(ref->eval_layers(chain, pos0, {}, runtime::Logits::all, lr).is_ok());
        for (size_t j = 0; j < path.size(); ++j) {
          INFO("round " << round << " leaf " << leaf << " depth " << j << " node " << path[j]);
          CHECK(same_bits(row(lt, path[j], n_vocab), row(lr, j, n_vocab)));
        }
      }
    }
  }
}

TEST_CASE("keep_tree_path: decoding on equals a run that only evaluated the kept path", "[runtime][tree]") {
  for (const auto& c : cases()) {
    INFO(c.path << " kv " << ggml_type_info(c.kv).name);
    auto tree = engine(c.path, c.kv), ref = engine(c.path, c.kv);
    const uint32_t n_vocab = tree->model().spec.hp.n_vocab;
    const uint64_t seed = test::fresh_seed();
    INFO("seed " << seed);
    Rng rng(seed);
    const auto prompt = random_prompt(rng, 30, n_vocab);
    std::vector<float> lt, lr;
    REQUIRE(tree->eval(prompt, runtime::Logits::last, lt).is_ok());
    // Three trees in a row, each followed by greedy decoding; 30 + 3 x (path + 12) positions wrap
    // the 16 + 16-slot rings several times.
    std::vector<int32_t> kept;  // everything the reference must see after the prompt
    for (int round = 0; round < 3; ++round) {
      const uint32_t n = 16, pos0 = tree->n_past();
      const auto tokens = random_prompt(rng, n, n_vocab);
      auto parents = random_parents(rng, n);
      parents[0] = -1;
      std::vector<float> logits;
      REQUIRE(tree->eval_tree(tokens, parents, pos0, {}, runtime::Logits::all, logits).is_ok());
      // The deepest node's path (the longest accepted path of a verification).
      uint32_t deepest = 0;
      for (uint32_t i = 0; i < n; ++i)
        if (path_to(parents, i).size() > path_to(parents, deepest).size()) deepest = i;
      const auto path = path_to(parents, deepest);
      Status s = tree->keep_tree_path(pos0, path);
      INFO(s.message());
      REQUIRE(s.is_ok());
      REQUIRE(tree->n_past() == pos0 + path.size());
      for (uint32_t j : path) kept.push_back(tokens[j]);
      lt.assign(logits.begin() + path.back() * n_vocab, logits.begin() + (path.back() + 1) * n_vocab);
      for (int step = 0; step < 12; ++step) {
        const int32_t t = runtime::argmax(lt);
        kept.push_back(t);
        REQUIRE(tree->eval(std::span(&t, 1), runtime::Logits::last, lt).is_ok());
      }
    }
    // The reference: the prompt, then every kept token one decode step at a time.
    REQUIRE(ref->eval(prompt, runtime::Logits::last, lr).is_ok());
    for (int32_t t : kept) REQUIRE(ref->eval(std::span(&t, 1), runtime::Logits::last, lr).is_ok());
    CHECK(ref->n_past() == tree->n_past());
    CHECK(same_bits(lt, lr));
    // And the stored KV of every position a query at n_past can read is the reference's (a sliding
    // ring's older slots may hold dropped branches' rows: outside the window, never read).
    for (uint32_t il = 0; il < tree->model().spec.hp.n_layer; ++il) {
      const uint32_t end = tree->n_past(), window = tree->model().spec.window(il);
      for (uint32_t p = window ? end - std::min(end, window) : 0; p < end; ++p) {
        INFO("layer " << il << " position " << p);
        REQUIRE(std::memcmp(tree->kv().k_row(il, p), ref->kv().k_row(il, p), tree->kv().k_row_bytes(il)) == 0);
        REQUIRE(std::memcmp(tree->kv().v_row(il, p), ref->kv().v_row(il, p), tree->kv().v_row_bytes(il)) == 0);
      }
    }
  }
}

TEST_CASE("eval_tree and keep_tree_path: bad trees and paths are refused and change nothing", "[runtime][tree]") {
  auto e = engine(test::small_spec_model(6, GgmlType::Q8_0), GgmlType::F32, 64, 16);
  std::vector<float> l;
  REQUIRE(e->eval(std::vector<int32_t>{1, 2, 3}, runtime::Logits::last, l).is_ok());
  using V = std::vector<int32_t>;
  auto tree_error = [&](const V& tokens, const V& parents, uint32_t pos0, const runtime::LayerRange& r = {}) {
    Status s = e->eval_tree(tokens, parents, pos0, r, runtime::Logits::all, l);
    CHECK(e->n_past() == 3);
    return s.is_ok() ? std::string("ok") : s.message();
  };
  CHECK_THAT(tree_error(V{5}, V{}, 3), Catch::Contains("1..16 nodes (got 0)"));
  CHECK_THAT(tree_error(V(17, 5), V(17, -1), 3), Catch::Contains("1..16 nodes (got 17)"));
  CHECK_THAT(tree_error(V{5, 6, 7}, V{-1, 0, 2}, 3), Catch::Contains("node 2 has parent 2"));
  CHECK_THAT(tree_error(V{5, 6}, V{-1, -2}, 3), Catch::Contains("node 1 has parent -2"));
  CHECK_THAT(tree_error(V{5, 6, 7}, V{-1, 0}, 3), Catch::Contains("1..2 nodes of its 2-node tree (got 3"));
  CHECK_THAT(tree_error(V{5}, V{-1}, 2), Catch::Contains("must start at n_past (3)"));
  CHECK_THAT(tree_error(V{5, 999}, V{-1, 0}, 3), Catch::Contains("token id 999"));
  const std::vector<uint8_t> skip = {0, 1, 0, 0};
  CHECK_THAT(tree_error(V{5}, V{-1}, 3, {0, 0, nullptr, nullptr, skip}), Catch::Contains("no skip mask"));
  CHECK_THAT(tree_error(V{5}, V{-1}, 3, {0, 9, nullptr, nullptr, {}}), Catch::Contains("beyond"));
  // A context too short for the tree's slots.
  auto small = engine(test::small_spec_model(6, GgmlType::Q8_0), GgmlType::F32, 8, 8);
  REQUIRE(small->eval(V{1, 2, 3, 4, 5}, runtime::Logits::last, l).is_ok());
  CHECK_THAT(small->eval_tree(V{1, 2, 3, 4}, V{-1, 0, 0, 1}, 5, {}, runtime::Logits::all, l).message(),
             Catch::Contains("context full"));

  test::check_keep_tree_path_refusals(*e);
}
