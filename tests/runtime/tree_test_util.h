// Shared by the CPU and GPU token-tree tests (Engine::eval_tree / keep_tree_path,
// runtime/token_tree.h): random trees, root-to-node paths, logits rows, and a gemma3 whose sliding
// window is shorter than a tree's depth.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "model/synth.h"
#include "runtime/engine.h"
#include "test_util.h"

namespace strata::test {

// A gemma3 with a 4-token window: a tree deeper than the window must drop its far ancestors.
inline std::string narrow_window_model() {
  model::SynthOptions o;
  o.arch = model::Arch::gemma3;
  o.preset = "tiny";
  o.type = GgmlType::F32;
  o.seed = 41;
  o.progress = false;
  REQUIRE(model::apply_preset(o).is_ok());
  o.hp.n_vocab = 356, o.hp.n_embd = 64, o.hp.n_layer = 3, o.hp.n_head = 2, o.hp.n_head_kv = 1;
  o.hp.n_embd_head = 32, o.hp.n_ff = 128, o.hp.n_swa = 4, o.hp.swa_pattern = 3, o.hp.query_pre_attn_scalar = 32;
  o.hp.tied_output = false;
  const std::string path = (temp_dir("tree-model") / "narrow-window.gguf").string();
  auto r = model::write_synthetic_model(o, path);
  INFO((r.is_ok() ? std::string() : r.message()));
  REQUIRE(r.is_ok());
  return path;
}

// A random tree of n nodes: node 0 a root, each later node a child of a random earlier node, or
// (rarely) another root.
inline std::vector<int32_t> random_parents(Rng& rng, uint32_t n) {
  std::vector<int32_t> p(n, -1);
  for (uint32_t i = 1; i < n; ++i) p[i] = rng.next_u32() % 8 == 0 ? -1 : int32_t(rng.next_u32() % i);
  return p;
}

// The nodes from a root down to `node`, in order.
inline std::vector<uint32_t> path_to(const std::vector<int32_t>& parents, uint32_t node) {
  std::vector<uint32_t> path;
  for (int32_t j = int32_t(node); j >= 0; j = parents[size_t(j)]) path.push_back(uint32_t(j));
  std::reverse(path.begin(), path.end());
  return path;
}

// Row r of row-major logits.
inline std::span<const float> row(const std::vector<float>& l, size_t r, size_t n_vocab) {
  return std::span(l).subspan(r * n_vocab, n_vocab);
}

// keep_tree_path's refusals on an engine whose sequence 0 holds 3 positions and that has at least
// 2 layers: only the last tree, at its pos0, along a chain of ancestors from a root, once; any other
// write in between forgets the tree. Each refusal changes nothing.
inline void check_keep_tree_path_refusals(runtime::Engine& e) {
  REQUIRE(e.n_past() == 3);
  using V = std::vector<int32_t>;
  std::vector<float> l;
  using P = std::vector<uint32_t>;
  CHECK_THAT(e.keep_tree_path(3, P{0}).message(), Catch::Contains("no token tree was evaluated at position 3"));
  REQUIRE(e.eval_tree(V{5, 6, 7, 8}, V{-1, 0, 0, 2}, 3, {}, runtime::Logits::all, l).is_ok());
  CHECK_THAT(e.keep_tree_path(4, P{0}).message(), Catch::Contains("no token tree was evaluated at position 4"));
  CHECK_THAT(e.keep_tree_path(3, P{1}).message(), Catch::Contains("node 1 is not a root"));
  CHECK_THAT(e.keep_tree_path(3, P{0, 3}).message(), Catch::Contains("node 3 is not a child of node 0"));
  CHECK_THAT(e.keep_tree_path(3, P{0, 2, 9}).message(), Catch::Contains("node 9 is not in the tree of 4 nodes"));
  CHECK(e.n_past() == 3);
  REQUIRE(e.keep_tree_path(3, P{0, 2, 3}).is_ok());
  CHECK(e.n_past() == 6);
  CHECK_THAT(e.keep_tree_path(3, P{0}).message(), Catch::Contains("no token tree"));  // kept once
  // Any other write in between forgets the tree (its slots may be overwritten).
  REQUIRE(e.eval_tree(V{5, 6}, V{-1, 0}, 6, {}, runtime::Logits::all, l).is_ok());
  REQUIRE(e.eval_layers(V{9}, 6, {0, 2, nullptr, nullptr, {}}, runtime::Logits::none, l).is_ok());
  CHECK_THAT(e.keep_tree_path(6, P{0}).message(), Catch::Contains("no token tree was evaluated at position 6"));
  REQUIRE(e.eval_tree(V{5, 6}, V{-1, 0}, 6, {}, runtime::Logits::all, l).is_ok());
  e.truncate(6);
  CHECK_THAT(e.keep_tree_path(6, P{0}).message(), Catch::Contains("no token tree"));
  CHECK(e.n_past() == 6);
}

}  // namespace strata::test
