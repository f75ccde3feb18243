// A drafted token tree, as Engine::eval_tree and keep_tree_path see it (M12 token trees): node i
// has parent parents[i] < i, or -1 for a child of the committed context. Its position (RoPE and
// the sliding window) is pos0 + depth(i); its KV slot is pos0 + i; it attends to the committed
// keys < pos0 (as a token at its position would) plus its ancestors and itself. Parents before
// children makes every ancestor's slot lower than its descendants', and depth(i) <= i.
//
// Engine-independent rules (validation, depths, visibility bits) live here once for every engine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace strata::runtime {

class TreeShape {
 public:
  // Errors: no nodes, more than max_nodes, a parent that is not an earlier node or -1.
  static Result<TreeShape> create(std::span<const int32_t> parents, uint32_t max_nodes);

  uint32_t size() const { return uint32_t(parents_.size()); }
  int32_t parent(uint32_t i) const { return parents_[i]; }
  uint32_t depth(uint32_t i) const { return depth_[i]; }  // 0 for a root
  // Bit j set: node j is node i or one of its ancestors (j <= i < 64).
  uint64_t ancestors(uint32_t i) const { return anc_[i]; }
  // The same bits, less the ancestors a query at node i's position cannot see through a sliding
  // window of `window` positions (depth(i) - depth(j) >= window); window 0: all of them.
  uint64_t visible(uint32_t i, uint32_t window) const;
  // Whether `path` (node indices) is a root followed by a child of each node in turn, so that
  // keeping it leaves a valid sequence: the error names the first bad entry.
  Status check_path(std::span<const uint32_t> path) const;

 private:
  std::vector<int32_t> parents_;
  std::vector<uint32_t> depth_;
  std::vector<uint64_t> anc_;
};

// The rows of one eval_tree call (both engines): nodes node0 .. node0 + n - 1 of `shape`, node i
// at slot pos0 + i and position pos0 + depth(i).
struct TreeRows {
  const TreeShape* shape = nullptr;
  uint32_t pos0 = 0, node0 = 0;
};

}  // namespace strata::runtime
