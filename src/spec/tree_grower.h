// Grows a TreeDraft along a TreePlan one level at a time, for every tree drafter: the drafter
// supplies each node's ranked candidate tokens (its draft head's top tokens, a replayed
// reference, ...) and which of them it is confident enough to propose; the grower places the
// planned children in level order (what Engine::eval_tree wants: a level's nodes are the last
// nodes of the tree when that level is run) and remembers which plan node each one fills.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "spec/drafter.h"
#include "spec/tree_plan.h"

namespace strata::spec {

class TreeGrower {
 public:
  // Starts `out` (cleared, verify fields left to the caller) with the root: the pending token.
  TreeGrower(const TreePlan& plan, int32_t pending, TreeDraft& out);
  // The current level's nodes: [level_begin(), level_end()) of out.tokens.
  uint32_t level_begin() const { return begin_; }
  uint32_t level_end() const { return end_; }
  uint32_t depth() const { return depth_; }  // of the current level
  // Candidates node's planned children need: its highest planned rank + 1 (0: a leaf of the plan).
  uint32_t wanted(uint32_t node) const;
  // Adds node's planned children: the child of rank r gets ranked[r] where keep(r) (ranked has
  // wanted(node) tokens at least; a child not kept drops its planned subtree).
  void add_children(uint32_t node, std::span<const int32_t> ranked, const std::function<bool(uint32_t)>& keep);
  // The children added become the current level; false when there are none.
  bool next_level();

 private:
  const TreePlan& plan_;
  TreeDraft& out_;
  std::vector<std::vector<uint32_t>> plan_children_;  // per plan node, in rank order
  std::vector<uint32_t> planned_;                     // per drafted node: its plan node
  uint32_t begin_ = 0, end_ = 1, depth_ = 0;
};

}  // namespace strata::spec
