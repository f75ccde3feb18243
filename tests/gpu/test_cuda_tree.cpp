// Token trees on the CUDA engine (Engine::eval_tree / keep_tree_path, runtime/token_tree.h), every
// comparison CUDA engine against CUDA engine, bit for bit: a chain tree is eval_layers; every
// root-to-leaf path of a random tree (several roots, positions != slots, grown in two calls) gives
// the logits of that path run alone as a chain, also when drafted over layers [0, d) and verified
// from layer d as the early-exit drafter does; after keep_tree_path, decoding on equals an engine
// that only ever decoded the kept tokens; a streamed engine equals the resident one. On the
// testdata models (gemma3's sliding-window rings wrap), a synthetic gemma3 whose window (4) is
// shorter than a tree's depth, f16 / q8_0 / q4_1 KV (mixed K and V too). Trees need the
// flash-decoding KV types: with f32 KV the engine refuses them. Skips without a GPU.
//
// The device KV is not host-readable here, so a wrong KV move shows in the logits of the decode
// steps after keep_tree_path (each one compared), not in a row memcmp as on the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <span>

#include <fmt/format.h>

#include "kernels/cuda/device_info.h"
#include "placements.h"
#include "runtime/batch_test_util.h"
#include "runtime/cuda_forward.h"
#include "runtime/sampler.h"
#include "runtime/tree_test_util.h"
#include "spec/spec_test_util.h"
#include "test_util.h"

using namespace strata;
using test::path_to;
using test::random_parents;
using test::random_prompt;
using test::row;
using test::same_bits;

namespace {

using ModelPtr = std::shared_ptr<const runtime::Model>;

bool no_gpu() {
  if (!kernels::cuda::devices().empty()) return false;
  WARN("skipped: no CUDA device");
  return true;
}

ModelPtr load(const std::string& path) {
  auto model = runtime::Model::load(path);
  INFO(path << ": " << (model.is_ok() ? std::string() : model.message()));
  REQUIRE(model.is_ok());
  return *model;
}

std::unique_ptr<runtime::CudaForward> engine(const ModelPtr& model, GgmlType k, GgmlType v,
                                             offload::Placement placement = {}, uint32_t ring_slots = 3,
                                             uint32_t n_ctx = 160, uint32_t ubatch = 16) {
  runtime::ForwardOptions o;
  o.n_ctx = n_ctx;
  o.ubatch = ubatch;
  o.k_type = k;
  o.v_type = v;
  o.placement = std::move(placement);
  o.ring_slots = ring_slots;
  auto e = runtime::CudaForward::create(model, o);
  INFO((e.is_ok() ? std::string() : e.message()));
  REQUIRE(e.is_ok());
  return std::move(*e);
}

struct Case {
  std::string path;
  GgmlType k, v;
};

std::vector<Case> cases() {
  const std::string m = test::testdata("models/");
  const std::string narrow = test::narrow_window_model(), spec = test::small_spec_model(5, GgmlType::Q8_0);
  using G = GgmlType;
  // Not gemma3-swa: its head_dim 48 has no flash-decoding kernel (the supports_trees case checks
  // that it refuses).
  return {{m + "gemma3-swa-q4k/model.gguf", G::F16, G::F16}, {m + "gemma3-swa-q4k/model.gguf", G::Q8_0, G::Q8_0},
          {m + "gemma3-swa-q4k/model.gguf", G::Q4_1, G::Q4_1}, {m + "gemma3-swa-q4k/model.gguf", G::F16, G::Q4_1},
          {m + "llama/model.gguf", G::F16, G::F16},          {m + "qwen3/model.gguf", G::Q8_0, G::Q8_0},
          {narrow, G::F16, G::F16},                         {narrow, G::Q4_1, G::Q4_1},
          {spec, G::Q8_0, G::Q8_0}};
}

std::string describe(const Case& c) {
  return fmt::format("{} K {} V {}", c.path, ggml_type_info(c.k).name, ggml_type_info(c.v).name);
}

// Two interleaved chains (node i's parent i - 2): 16 nodes, node 15 at depth 8, its path
// 0, 1, 3, 5, ..., 15: slots far from positions, deeper than the narrow model's window.
std::vector<int32_t> interleaved() {
  std::vector<int32_t> p(16, 0);
  p[0] = -1;
  for (int32_t i = 3; i < 16; ++i) p[size_t(i)] = i - 2;
  return p;
}

uint32_t deepest(const std::vector<int32_t>& parents) {
  uint32_t best = 0;
  for (uint32_t i = 0; i < parents.size(); ++i)
    if (path_to(parents, i).size() > path_to(parents, best).size()) best = i;
  return best;
}

bool is_leaf(const std::vector<int32_t>& parents, uint32_t node) {
  return std::find(parents.begin(), parents.end(), int32_t(node)) == parents.end();
}

// eval_tree over the whole tree in two calls (the first half of the nodes, then the rest), as a
// drafter grows it; the logits of every node, in node order.
std::vector<float> tree_in_two_calls(runtime::Engine& e, const std::vector<int32_t>& tokens,
                                     const std::vector<int32_t>& parents, uint32_t pos0) {
  const uint32_t n = uint32_t(parents.size()), half = n / 2, n_vocab = e.model().spec.hp.n_vocab;
  const std::span<const int32_t> all(parents);
  std::vector<float> first, rest;
  if (half > 0) {
    Status s = e.eval_tree(std::span(tokens).first(half), all.first(half), pos0, {}, runtime::Logits::all, first);
    INFO(s.message());
    REQUIRE(s.is_ok());
    REQUIRE(first.size() == size_t(half) * n_vocab);  // the rows of the nodes run, no more
  }
  Status s = e.eval_tree(std::span(tokens).subspan(half), all, pos0, {}, runtime::Logits::all, rest);
  INFO(s.message());
  REQUIRE(s.is_ok());
  REQUIRE(rest.size() == size_t(n - half) * n_vocab);
  CHECK(e.n_past() == pos0);  // a tree commits nothing by itself
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

// The engine's logits after each of n greedy decode steps (the first token: argmax of `last`).
std::vector<std::vector<float>> decode(runtime::Engine& e, std::vector<float> last, uint32_t n,
                                       std::vector<int32_t>* tokens = nullptr) {
  std::vector<std::vector<float>> out;
  for (uint32_t i = 0; i < n; ++i) {
    const int32_t t = runtime::argmax(last);
    if (tokens) tokens->push_back(t);
    Status s = e.eval(std::span(&t, 1), runtime::Logits::last, last);
    INFO(s.message());
    REQUIRE(s.is_ok());
    out.push_back(last);
  }
  return out;
}

// A fixed run of tree work from a fresh sequence, everything it produces concatenated (logits and
// the streams at layer d): the prompt; a random tree in two calls; keep the deepest path; 6 greedy
// decode steps; a tree drafted over layers [0, d) and verified from layer d; keep a random node's
// path; 6 decode steps. Random choices from `seed` only, so two engines that compute the same
// bits produce the same run.
std::vector<float> tree_run(runtime::Engine& e, uint64_t seed) {
  const uint32_t n_vocab = e.model().spec.hp.n_vocab, n_embd = e.model().spec.hp.n_embd,
                 n_layer = e.model().spec.hp.n_layer;
  Rng rng(seed);
  std::vector<float> out, l;
  e.truncate(0);
  REQUIRE(e.eval(random_prompt(rng, 30, n_vocab), runtime::Logits::last, l).is_ok());
  out.insert(out.end(), l.begin(), l.end());
  auto keep_and_decode = [&](uint32_t pos0, const std::vector<uint32_t>& path, const std::vector<float>& logits) {
    Status s = e.keep_tree_path(pos0, path);
    INFO(s.message());
    REQUIRE(s.is_ok());
    REQUIRE(e.n_past() == pos0 + path.size());
    const auto last = row(logits, path.back(), n_vocab);
    for (const auto& step : decode(e, std::vector<float>(last.begin(), last.end()), 6))
      out.insert(out.end(), step.begin(), step.end());
  };
  {
    const uint32_t pos0 = e.n_past();
    const auto parents = random_parents(rng, 16);
    const auto tokens = random_prompt(rng, 16, n_vocab);
    const auto logits = tree_in_two_calls(e, tokens, parents, pos0);
    out.insert(out.end(), logits.begin(), logits.end());
    keep_and_decode(pos0, path_to(parents, deepest(parents)), logits);
  }
  {
    const uint32_t pos0 = e.n_past(), d = 1 + rng.next_u32() % (n_layer - 1);
    const auto parents = random_parents(rng, 16);
    const auto tokens = random_prompt(rng, 16, n_vocab);
    std::vector<float> hidden(16 * size_t(n_embd)), logits;
    REQUIRE(e.eval_tree(tokens, parents, pos0, {0, d, nullptr, hidden.data(), {}}, runtime::Logits::all, logits)
                .is_ok());
    out.insert(out.end(), logits.begin(), logits.end());
    out.insert(out.end(), hidden.begin(), hidden.end());
    REQUIRE(e.eval_tree(tokens, parents, pos0, {d, 0, hidden.data(), nullptr, {}}, runtime::Logits::all, logits)
                .is_ok());
    out.insert(out.end(), logits.begin(), logits.end());
    keep_and_decode(pos0, path_to(parents, rng.next_u32() % 16), logits);
  }
  return out;
}

// Every layer's attention and FFN streamed, the head resident: the ring of 2 slots cycles fastest.
offload::Placement stream_all_layers(uint32_t n_layer) {
  offload::Placement r;
  for (uint32_t il = 0; il < n_layer; ++il) {
    r.attention.push_back(offload::Tier::stream);
    r.ffn.push_back(offload::Tier::stream);
  }
  return r;
}

}  // namespace

TEST_CASE("GPU eval_tree: a chain tree equals eval_layers bit for bit", "[gpu][tree]") {
  if (no_gpu()) return;
  for (const auto& c : cases()) {
    INFO(describe(c));
    const auto model = load(c.path);
    auto a = engine(model, c.k, c.v), b = engine(model, c.k, c.v);
    REQUIRE(b->supports_trees());
    const uint32_t n_vocab = model->spec.hp.n_vocab;
    Rng rng(21);
    // 37 tokens: past the 16-token windows, so the rings have wrapped.
    const auto prompt = random_prompt(rng, 37, n_vocab);
    std::vector<float> la, lb;
    REQUIRE(a->eval(prompt, runtime::Logits::last, la).is_ok());
    REQUIRE(b->eval(prompt, runtime::Logits::last, lb).is_ok());
    // 1 node (a decode step), 3 (the first multi-column GEMV sizes) and 16 (kMaxExactRows).
    for (uint32_t n : {1u, 3u, 16u}) {
      INFO(n << " nodes");
      const auto chain = random_prompt(rng, n, n_vocab);
      std::vector<int32_t> parents(n);
      for (uint32_t i = 0; i < n; ++i) parents[i] = int32_t(i) - 1;
      REQUIRE(a->eval_layers(chain, 37, {}, runtime::Logits::all, la).is_ok());
      Status s = b->eval_tree(chain, parents, 37, {}, runtime::Logits::all, lb);
      INFO(s.message());
      REQUIRE(s.is_ok());
      CHECK(b->n_past() == 37);
      CHECK(same_bits(la, lb));
      a->truncate(37);
    }
  }
}

TEST_CASE("GPU eval_tree: every root-to-leaf path gives the logits of that path evaluated as a chain",
          "[gpu][tree]") {
  if (no_gpu()) return;
  for (const auto& c : cases()) {
    INFO(describe(c));
    const auto model = load(c.path);
    auto tree = engine(model, c.k, c.v), ref = engine(model, c.k, c.v);
    const uint32_t n_vocab = model->spec.hp.n_vocab;
    const uint64_t seed = test::fresh_seed();
    INFO("seed " << seed);
    Rng rng(seed);
    for (int round = 0; round < 3; ++round) {
      const auto prompt = random_prompt(rng, 20 + rng.next_u32() % 30, n_vocab);
      const auto parents = round == 0 ? interleaved() : random_parents(rng, 6 + rng.next_u32() % 11);  // 6 .. 16
      const uint32_t n = uint32_t(parents.size()), pos0 = uint32_t(prompt.size());
      const auto tokens = random_prompt(rng, n, n_vocab);
      std::vector<float> lr;
      tree->truncate(0);
      REQUIRE(tree->eval(prompt, runtime::Logits::last, lr).is_ok());
      const auto lt = tree_in_two_calls(*tree, tokens, parents, pos0);
      ref->truncate(0);
      REQUIRE(ref->eval(prompt, runtime::Logits::last, lr).is_ok());
      uint32_t leaves = 0;
      for (uint32_t leaf = 0; leaf < n; ++leaf) {
        if (!is_leaf(parents, leaf)) continue;
        ++leaves;
        const auto path = path_to(parents, leaf);
        std::vector<int32_t> chain;
        for (uint32_t j : path) chain.push_back(tokens[j]);
        ref->truncate(pos0);
        REQUIRE(ref->eval_layers(chain, pos0, {}, runtime::Logits::all, lr).is_ok());
        for (size_t j = 0; j < path.size(); ++j) {
          INFO("round " << round << " leaf " << leaf << " depth " << j << " node " << path[j]);
          CHECK(same_bits(row(lt, path[j], n_vocab), row(lr, j, n_vocab)));
        }
      }
      CHECK(leaves >= (round == 0 ? 2u : 1u));
    }
  }
}

// The early-exit drafter's use (spec/early_exit.cpp, SpeculativeDecoder::verify_tree): each level
// through layers [0, d) with the streams at layer d out and the draft head's logits, then the whole
// tree from layer d with those streams in. Both sets of rows, and the streams, are the chains'.
TEST_CASE("GPU eval_tree drafted over the first d layers then verified from layer d gives each path's chain",
          "[gpu][tree]") {
  if (no_gpu()) return;
  for (const auto& c : cases()) {
    INFO(describe(c));
    const auto model = load(c.path);
    auto tree = engine(model, c.k, c.v), ref = engine(model, c.k, c.v);
    const uint32_t n_vocab = model->spec.hp.n_vocab, n_embd = model->spec.hp.n_embd,
                   n_layer = model->spec.hp.n_layer;
    const uint64_t seed = test::fresh_seed();
    INFO("seed " << seed);
    Rng rng(seed);
    for (int round = 0; round < 2; ++round) {
      const uint32_t d = 1 + rng.next_u32() % (n_layer - 1);
      INFO("round " << round << " d " << d);
      const auto prompt = random_prompt(rng, 20 + rng.next_u32() % 30, n_vocab);
      const auto parents = round == 0 ? interleaved() : random_parents(rng, 16);
      const uint32_t n = uint32_t(parents.size()), pos0 = uint32_t(prompt.size()), half = n / 2;
      const auto tokens = random_prompt(rng, n, n_vocab);
      std::vector<float> lr, draft, part, verified;
      tree->truncate(0);
      REQUIRE(tree->eval(prompt, runtime::Logits::last, lr).is_ok());
      std::vector<float> hidden(size_t(n) * n_embd);
      const std::span<const int32_t> all(parents);
      for (auto [b, e] : {std::pair{0u, half}, std::pair{half, n}}) {
        const runtime::LayerRange r{0, d, nullptr, hidden.data() + size_t(b) * n_embd, {}};
        Status s = tree->eval_tree(std::span(tokens).subspan(b, e - b), all.first(e), pos0, r, runtime::Logits::all, part);
        INFO(s.message());
        REQUIRE(s.is_ok());
        draft.insert(draft.end(), part.begin(), part.end());
      }
      Status s = tree->eval_tree(tokens, parents, pos0, {d, 0, hidden.data(), nullptr, {}}, runtime::Logits::all,
                                 verified);
      INFO(s.message());
      REQUIRE(s.is_ok());
      CHECK(tree->n_past() == pos0);
      REQUIRE(draft.size() == size_t(n) * n_vocab);
      REQUIRE(verified.size() == size_t(n) * n_vocab);
      ref->truncate(0);
      REQUIRE(ref->eval(prompt, runtime::Logits::last, lr).is_ok());
      for (uint32_t leaf = 0; leaf < n; ++leaf) {
        if (!is_leaf(parents, leaf)) continue;
        const auto path = path_to(parents, leaf);
        std::vector<int32_t> chain;
        for (uint32_t j : path) chain.push_back(tokens[j]);
        std::vector<float> chain_hidden(chain.size() * n_embd), chain_draft, chain_verified;
        ref->truncate(pos0);
        REQUIRE(ref->eval_layers(chain, pos0, {0, d, nullptr, chain_hidden.data(), {}}, runtime::Logits::all,
                                 chain_draft).is_ok());
        REQUIRE(ref->eval_layers(chain, pos0, {d, 0, chain_hidden.data(), nullptr, {}}, runtime::Logits::all,
                                 chain_verified).is_ok());
        for (size_t j = 0; j < path.size(); ++j) {
          INFO("leaf " << leaf << " depth " << j << " node " << path[j]);
          CHECK(same_bits(std::span(hidden).subspan(size_t(path[j]) * n_embd, n_embd),
                          std::span(chain_hidden).subspan(j * n_embd, n_embd)));
          CHECK(same_bits(row(draft, path[j], n_vocab), row(chain_draft, j, n_vocab)));
          CHECK(same_bits(row(verified, path[j], n_vocab), row(chain_verified, j, n_vocab)));
        }
      }
    }
  }
}

TEST_CASE("GPU keep_tree_path: decoding on equals a run that only decoded the kept tokens", "[gpu][tree]") {
  if (no_gpu()) return;
  for (const auto& c : cases()) {
    INFO(describe(c));
    const auto model = load(c.path);
    auto tree = engine(model, c.k, c.v), ref = engine(model, c.k, c.v);
    const uint32_t n_vocab = model->spec.hp.n_vocab;
    const uint64_t seed = test::fresh_seed();
    INFO("seed " << seed);
    Rng rng(seed);
    const auto prompt = random_prompt(rng, 30, n_vocab);
    std::vector<float> lt, lr;
    REQUIRE(tree->eval(prompt, runtime::Logits::last, lt).is_ok());
    REQUIRE(ref->eval(prompt, runtime::Logits::last, lr).is_ok());
    REQUIRE(same_bits(lt, lr));
    // Four trees in a row, each followed by 8 greedy decode steps; 30 + 4 x (path + 8) positions
    // wrap the 16 + 16-slot rings several times. Kept: the deepest node's path (the longest
    // accepted path of a verification), a random node's, the last node's.
    bool moved = false;  // some kept node's slot was not its position: its KV had to move
    for (int round = 0; round < 4; ++round) {
      const uint32_t pos0 = tree->n_past();
      const auto parents = round == 0 ? interleaved() : random_parents(rng, 16);
      const uint32_t n = uint32_t(parents.size());
      const auto tokens = random_prompt(rng, n, n_vocab);
      const uint32_t keep = round == 1 ? rng.next_u32() % n : round == 2 ? n - 1 : deepest(parents);
      INFO("round " << round << " pos0 " << pos0 << " keeping node " << keep);
      const auto logits = tree_in_two_calls(*tree, tokens, parents, pos0);
      const auto path = path_to(parents, keep);
      Status s = tree->keep_tree_path(pos0, path);
      INFO(s.message());
      REQUIRE(s.is_ok());
      REQUIRE(tree->n_past() == pos0 + path.size());
      // What the tree engine says after each token it consumed: the path's tree rows, then its
      // decode steps' logits.
      std::vector<int32_t> consumed;
      std::vector<std::vector<float>> after;
      for (size_t j = 0; j < path.size(); ++j) {
        consumed.push_back(tokens[path[j]]);
        const auto r = row(logits, path[j], n_vocab);
        after.emplace_back(r.begin(), r.end());
        moved = moved || path[j] != j;
      }
      for (auto& l : decode(*tree, after.back(), 8, &consumed)) after.push_back(std::move(l));
      REQUIRE(consumed.size() == after.size());
      // The reference: the same tokens, one decode step each.
      for (size_t i = 0; i < consumed.size(); ++i) {
        INFO("token " << i << " of the round" << (i < path.size() ? " (tree node)" : " (decode step)"));
        REQUIRE(ref->eval(std::span(&consumed[i], 1), runtime::Logits::last, lr).is_ok());
        CHECK(same_bits(after[i], lr));
      }
      CHECK(ref->n_past() == tree->n_past());
    }
    CHECK(moved);
  }
}

TEST_CASE("GPU token trees on a streamed engine give the resident engine's bits", "[gpu][tree]") {
  if (no_gpu()) return;
  for (const auto& c : cases()) {
    INFO(describe(c));
    const auto model = load(c.path);
    const uint32_t n_layer = model->spec.hp.n_layer;
    const uint64_t seed = test::fresh_seed();
    INFO("seed " << seed);
    auto resident = engine(model, c.k, c.v);
    const auto want = tree_run(*resident, seed);
    struct Streamed {
      const char* name;
      offload::Placement placement;
      uint32_t ring_slots;
    };
    for (const auto& st : {Streamed{"odd layers and the head streamed", test::stream_odd_layers(n_layer), 3},
                           Streamed{"every layer streamed through 2 slots", stream_all_layers(n_layer), 2}}) {
      INFO(st.name);
      auto streamed = engine(model, c.k, c.v, st.placement, st.ring_slots);
      CHECK(streamed->supports_trees());
      const auto got = tree_run(*streamed, seed);
      REQUIRE(got.size() == want.size());
      CHECK(same_bits(got, want));
    }
  }
}

// Trees run on the flash-decoding attention (kernels/cuda/attention_tree.h), which reads f16 and
// the quantised KV types, with every block computed on the device; an f32-KV engine says so, and
// the speculative decoder verifies chains there.
TEST_CASE("GPU supports_trees follows the KV type and an f32-KV engine refuses trees", "[gpu][tree]") {
  if (no_gpu()) return;
  const auto model = load(test::small_spec_model(7, GgmlType::Q8_0));
  using G = GgmlType;
  for (G kv : {G::F16, G::Q8_0, G::Q4_1}) {
    INFO(ggml_type_info(kv).name);
    CHECK(engine(model, kv, kv)->supports_trees());
  }
  // A cpu-tier FFN block computes each row alone on the host: trees run. Host KV has no
  // tree-masked attention: they do not.
  offload::Placement host;
  for (uint32_t il = 0; il < model->spec.hp.n_layer; ++il) {
    host.attention.push_back(offload::Tier::gpu);
    host.ffn.push_back(il == 1 ? offload::Tier::cpu : offload::Tier::gpu);
  }
  CHECK(engine(model, G::F16, G::F16, host)->supports_trees());
  for (uint32_t il = 0; il < model->spec.hp.n_layer; ++il)
    host.kv.push_back(model->spec.window(il) == 0 ? offload::KvTier::host : offload::KvTier::gpu);
  CHECK_FALSE(engine(model, G::F16, G::F16, host)->supports_trees());
  // Nor a head_dim without a flash-decoding kernel (gemma3-swa: 48).
  const auto hd48 = load(test::testdata("models/gemma3-swa/model.gguf"));
  REQUIRE(hd48->spec.hp.n_embd_head == 48);
  CHECK_FALSE(engine(hd48, G::F16, G::F16)->supports_trees());
  auto e = engine(model, G::F32, G::F32), twin = engine(model, G::F32, G::F32);
  CHECK_FALSE(e->supports_trees());
  const std::vector<int32_t> prompt = {2, 17, 40};
  std::vector<float> l, lt;
  REQUIRE(e->eval(prompt, runtime::Logits::last, l).is_ok());
  REQUIRE(twin->eval(prompt, runtime::Logits::last, lt).is_ok());
  const std::vector<int32_t> tokens = {5, 6}, parents = {-1, 0};
  for (const auto& [t, p] : {std::pair{tokens, parents}, std::pair{std::vector<int32_t>{5}, std::vector<int32_t>{-1}}}) {
    std::vector<float> refused;
    Status s = e->eval_tree(t, p, 3, {}, runtime::Logits::all, refused);
    CHECK_FALSE(s.is_ok());
    CHECK_THAT(s.message(), Catch::Contains("tree") && Catch::Contains("KV"));
    CHECK(e->n_past() == 3);
  }
  CHECK_FALSE(e->keep_tree_path(3, std::vector<uint32_t>{0}).is_ok());
  CHECK(e->n_past() == 3);
  // Nothing was written: decoding on equals an engine that never saw the refused calls.
  for (const auto& step : decode(*e, l, 4)) {
    std::vector<float> want;
    const int32_t t = runtime::argmax(lt);
    REQUIRE(twin->eval(std::span(&t, 1), runtime::Logits::last, want).is_ok());
    CHECK(same_bits(step, want));
    lt = want;
  }
}

TEST_CASE("GPU eval_tree and keep_tree_path: bad trees and paths are refused and change nothing", "[gpu][tree]") {
  if (no_gpu()) return;
  const auto model = load(test::small_spec_model(6, GgmlType::Q8_0));
  auto e = engine(model, GgmlType::F16, GgmlType::F16, {}, 3, 64);
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
  CHECK_THAT(tree_error(V{5, 6, 7}, V{-1, 0}, 3), Catch::Contains("1..2 nodes of its 2-node tree (got 3"));
  CHECK_THAT(tree_error(V{5}, V{-1}, 2), Catch::Contains("must start at n_past (3)"));
  CHECK_THAT(tree_error(V{5, 999}, V{-1, 0}, 3), Catch::Contains("token id 999"));
  const std::vector<uint8_t> skip = {0, 1, 0, 0};
  CHECK_THAT(tree_error(V{5}, V{-1}, 3, {0, 0, nullptr, nullptr, skip}), Catch::Contains("no skip mask"));
  // A context too short for the tree's slots.
  auto small = engine(model, GgmlType::F16, GgmlType::F16, {}, 3, 8, 8);
  REQUIRE(small->eval(V{1, 2, 3, 4, 5}, runtime::Logits::last, l).is_ok());
  CHECK_THAT(small->eval_tree(V{1, 2, 3, 4}, V{-1, 0, 0, 1}, 5, {}, runtime::Logits::all, l).message(),
             Catch::Contains("context full"));
  CHECK(small->n_past() == 5);

  test::check_keep_tree_path_refusals(*e);
}

// Tree steps replay a CUDA graph per node count, their paths, path lengths and positions device
// inputs; STRATA_TREE_GRAPHS=0 (read when an engine is created) makes the eager engine to compare
// with. Every tree step of the graphed engine must give the eager engine's bits -- the same shapes
// at the same positions (a replay of the first run's graphs), at other positions (the same tree
// after a longer prompt), other shapes of the same node count (no new capture), drafts over
// [0, d) and verifications from d -- and each must have been a graph launch.
TEST_CASE("GPU token-tree steps replayed as CUDA graphs give the eager steps' bits", "[gpu][tree]") {
  if (no_gpu()) return;
  const auto model = load(test::testdata("models/gemma3-swa-q4k/model.gguf"));
  const char* was = std::getenv("STRATA_TREE_GRAPHS");
  const std::string saved = was ? was : "";
  unsetenv("STRATA_TREE_GRAPHS");
  auto graphed = engine(model, GgmlType::Q8_0, GgmlType::Q8_0);
  setenv("STRATA_TREE_GRAPHS", "0", 1);
  auto eager = engine(model, GgmlType::Q8_0, GgmlType::Q8_0);
  if (was) setenv("STRATA_TREE_GRAPHS", saved.c_str(), 1);
  else unsetenv("STRATA_TREE_GRAPHS");
  uint32_t tree_steps = 0;
  for (uint64_t seed : {3u, 3u, 4u}) {  // the second run replays the first one's graphs
    INFO("seed " << seed);
    CHECK(same_bits(tree_run(*graphed, seed), tree_run(*eager, seed)));
    tree_steps += 4;  // tree_run: a tree in two calls, then a draft and its verification
  }
  const uint32_t n_vocab = model->spec.hp.n_vocab;
  Rng rng(5);
  const auto tokens = random_prompt(rng, 16, n_vocab), prompt = random_prompt(rng, 40, n_vocab);
  const auto parents = interleaved();
  for (uint32_t len : {30u, 37u}) {  // one shape at two positions: the second call replays the first's graph
    INFO("prompt " << len);
    std::vector<float> lg, le;
    for (runtime::Engine* e : {static_cast<runtime::Engine*>(graphed.get()), static_cast<runtime::Engine*>(eager.get())}) {
      e->truncate(0);
      REQUIRE(e->eval(std::span(prompt).first(len), runtime::Logits::last, lg).is_ok());
    }
    REQUIRE(graphed->eval_tree(tokens, parents, len, {}, runtime::Logits::all, lg).is_ok());
    REQUIRE(eager->eval_tree(tokens, parents, len, {}, runtime::Logits::all, le).is_ok());
    CHECK(same_bits(lg, le));
    ++tree_steps;
  }
  // Other shapes of 16 nodes (chains, stars, random trees) replay the 16-node graph captured above.
  const uint64_t captures = graphed->graph_stats().captures;
  for (uint32_t round = 0; round < 4; ++round) {
    INFO("shape " << round);
    std::vector<int32_t> other(16);
    for (int32_t i = 0; i < 16; ++i) other[i] = round == 0 ? i - 1 : round == 1 ? (i == 0 ? -1 : 0) : -1;
    if (round >= 2) other = random_parents(rng, 16);
    std::vector<float> lg, le;
    for (runtime::Engine* e : {static_cast<runtime::Engine*>(graphed.get()), static_cast<runtime::Engine*>(eager.get())}) {
      e->truncate(0);
      REQUIRE(e->eval(std::span(prompt).first(33), runtime::Logits::last, lg).is_ok());
    }
    REQUIRE(graphed->eval_tree(tokens, other, 33, {}, runtime::Logits::all, lg).is_ok());
    REQUIRE(eager->eval_tree(tokens, other, 33, {}, runtime::Logits::all, le).is_ok());
    CHECK(same_bits(lg, le));
    ++tree_steps;
  }
  CHECK(graphed->graph_stats().captures == captures);
  // Both engines replay their decode steps alike; only the graphed one launches its tree steps.
  CHECK(graphed->graph_stats().launches - eager->graph_stats().launches == tree_steps);
}
