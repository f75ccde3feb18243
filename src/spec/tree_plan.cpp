#include "spec/tree_plan.h"

#include <algorithm>
#include <limits>
#include <queue>

namespace strata::spec {
namespace {

constexpr double kPriorWeight = 2, kDecay = 0.97;

double prior(uint32_t rank) { return rank == 0 ? 0.6 : 0.15 / rank; }

}  // namespace

TreeShaper::TreeShaper(uint32_t branch) : branch_(std::max(1u, branch)) {}

double TreeShaper::p(uint32_t depth, uint32_t rank) const {
  // The prior of a depth is the estimate one level up (the fixed prior at depth 1): a depth the
  // trees have not reached yet is expected to behave like the deepest one measured. With a flat
  // prior, depths beyond the current trees kept 0.6 whatever the text, so at a measured 0.9 the
  // trees never grew past them (27B replay at A = 0.9: 7-node chains against the best 9).
  const double pr = depth <= 1 ? prior(rank) : p(depth - 1, rank);
  if (depth == 0 || depth > est_.size() || rank >= est_[depth - 1].size()) return pr;
  const Est& e = est_[depth - 1][rank];
  return (e.hit + pr * kPriorWeight) / (e.tried + kPriorWeight);
}

void TreeShaper::observe(uint32_t depth, uint32_t candidates, int32_t matched) {
  if (depth == 0 || candidates == 0) return;
  if (est_.size() < depth) est_.resize(depth);
  auto& row = est_[depth - 1];
  if (row.size() < candidates) row.resize(candidates);
  // Greedy verification has one right token: P(rank r is it), over every round that drafted rank r.
  for (uint32_t r = 0; r < candidates; ++r) {
    row[r].hit = row[r].hit * kDecay + (int32_t(r) == matched ? 1 : 0);
    row[r].tried = row[r].tried * kDecay + 1;
  }
}

TreePlan TreeShaper::plan(uint32_t max_nodes, uint32_t max_depth) const {
  TreePlan t;
  t.parent.push_back(-1), t.rank.push_back(0), t.depth.push_back(0), t.value.push_back(1.0);
  std::vector<double>& value = t.value;
  struct Cand {
    double value;
    uint64_t order;  // ties: the earlier candidate (shallower, lower rank) first
    int32_t parent;
    uint32_t rank;
    bool operator<(const Cand& o) const { return value != o.value ? value < o.value : order > o.order; }
  };
  std::priority_queue<Cand> q;
  uint64_t order = 0;
  auto push = [&](int32_t parent, uint32_t rank) {
    const uint32_t d = t.depth[size_t(parent)] + 1;
    if (d > max_depth || rank >= branch_) return;
    // P(rank r is the target's token | parent accepted): siblings are exclusive, so values add.
    q.push({value[size_t(parent)] * p(d, rank), order++, parent, rank});
  };
  push(0, 0);
  while (t.size() < max_nodes && !q.empty()) {
    const Cand c = q.top();
    q.pop();
    const int32_t id = int32_t(t.size());
    t.parent.push_back(c.parent), t.rank.push_back(c.rank), t.depth.push_back(t.depth[size_t(c.parent)] + 1);
    value.push_back(c.value);
    push(id, 0);               // its first child
    push(c.parent, c.rank + 1);  // its next sibling
  }
  return t;
}

TreePlan TreePlan::prefix(uint32_t n) const {
  TreePlan t = *this;
  n = std::min(n, size());
  t.parent.resize(n), t.rank.resize(n), t.depth.resize(n), t.value.resize(n);
  return t;
}

uint32_t best_tree_size(const TreePlan& plan, const std::function<double(uint32_t)>& t_level,
                        const std::function<double(uint32_t)>& t_verify) {
  uint32_t best = 1;
  double tokens = 0, best_rate = -1;
  std::vector<uint32_t> width;  // nodes per depth in the prefix
  for (uint32_t n = 1; n <= plan.size(); ++n) {
    tokens += plan.value[n - 1];
    const uint32_t d = plan.depth[n - 1];
    if (width.size() <= d) width.resize(d + 1, 0);
    ++width[d];
    double cost = t_verify(n);
    for (const uint32_t w : width) cost += t_level(w);
    const double rate = cost > 0 ? tokens / cost : tokens;
    if (rate > best_rate) best_rate = rate, best = n;
  }
  return best;
}

std::vector<int32_t> top_tokens(std::span<const float> logits, uint32_t k) {
  std::vector<int32_t> top;
  top.reserve(k + 1);
  const float* l = logits.data();
  // The k-th best so far in a register: most entries cost one comparison (a pass over 262K
  // logits per drafted node).
  float floor = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (top.size() == k && !(l[i] > floor)) continue;
    // After every kept index with a logit >= this one: equal logits keep index order.
    auto at = std::find_if(top.begin(), top.end(), [&](int32_t j) { return l[i] > l[size_t(j)]; });
    top.insert(at, int32_t(i));
    if (top.size() > k) top.pop_back();
    if (top.size() == k) floor = l[size_t(top.back())];
  }
  return top;
}

}  // namespace strata::spec
