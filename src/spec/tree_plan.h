// The shape of a drafted token tree (M12 token trees, Sequoia/SpecExec-style), chosen from the
// measured acceptance per (depth, rank): a node at depth k of rank r (r = 0: the draft head's top
// token after its parent, r = 1: its second, ...) is worth P(the target's token at depth k is
// that candidate | its parent was accepted), and a node's value is the product along its path:
// the probability that verification accepts it. The plan takes the highest-valued nodes up to the
// node budget (best-first, so the plan is a tree and siblings come in rank order). Estimates
// start from priors (at depth 1, rank 0: 0.6, like a chain's prior acceptance; rank r > 0:
// 0.15 / r; deeper, the estimate of the same rank one level up) and follow the measurements
// with a geometric decay, so the shape follows the text (b = 2 at the first levels and 1 deeper
// falls out where the second candidates hit early).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace strata::spec {

// Node 0 is the pending token (the root, depth 0); nodes are in best-first order (parents first).
struct TreePlan {
  std::vector<int32_t> parent;  // -1 for the root
  std::vector<uint32_t> rank;   // among its siblings (0 for the root)
  std::vector<uint32_t> depth;
  std::vector<double> value;    // P(verification accepts the node); 1 for the root
  uint32_t size() const { return uint32_t(parent.size()); }
  // The first n nodes (best-first order keeps parents first, so a prefix is a tree: the plan a
  // budget of n nodes would give).
  TreePlan prefix(uint32_t n) const;
};

// The node count n (1 .. plan.size()) whose prefix gives the most expected tokens per second:
//   (sum of the n nodes' values: accepted drafts plus the verifier's own token)
//   / (sum over depths 0 .. deepest of t_level(nodes at that depth) + t_verify(n))
// (a drafter takes one pass per level, the deepest nodes' included to reach the verify layer).
// Why: a verify pass costs more with more rows (on the CPU much more), and so does a wider level
// (more columns, a vocabulary pass per node to choose its children), so filling the node budget
// can lose to a smaller tree -- at high acceptance, to a chain; ties keep the smaller tree.
uint32_t best_tree_size(const TreePlan& plan, const std::function<double(uint32_t)>& t_level,
                        const std::function<double(uint32_t)>& t_verify);

class TreeShaper {
 public:
  // branch: most children per node (>= 1; 1 plans a chain).
  explicit TreeShaper(uint32_t branch);
  uint32_t branch() const { return branch_; }
  // At most max_nodes nodes (root included, >= 1) and depth max_depth.
  TreePlan plan(uint32_t max_nodes, uint32_t max_depth) const;
  // A node at depth - 1 on the accepted path had candidates of ranks [0, candidates) drafted as
  // children; the target's token was the one of rank `matched` (-1: none of them).
  void observe(uint32_t depth, uint32_t candidates, int32_t matched);
  double p(uint32_t depth, uint32_t rank) const;  // the estimate above (depth >= 1)

 private:
  struct Est {
    double hit = 0, tried = 0;
  };
  uint32_t branch_;
  std::vector<std::vector<Est>> est_;  // [depth - 1][rank], grown on demand
};

// The k highest logits' indices, highest first (ties: the lower index first, as runtime::argmax).
std::vector<int32_t> top_tokens(std::span<const float> logits, uint32_t k);

}  // namespace strata::spec
