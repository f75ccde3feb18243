#include "spec/tree_grower.h"

#include <algorithm>

namespace strata::spec {

TreeGrower::TreeGrower(const TreePlan& plan, int32_t pending, TreeDraft& out) : plan_(plan), out_(out) {
  out_.tokens.assign(1, pending);
  out_.parents.assign(1, -1);
  out_.rank.assign(1, 0);
  plan_children_.resize(plan.size());
  for (uint32_t i = 1; i < plan.size(); ++i) plan_children_[size_t(plan.parent[i])].push_back(i);
  for (auto& c : plan_children_)
    std::stable_sort(c.begin(), c.end(), [&](uint32_t a, uint32_t b) { return plan.rank[a] < plan.rank[b]; });
  planned_.assign(1, 0);
}

uint32_t TreeGrower::wanted(uint32_t node) const {
  const auto& c = plan_children_[planned_[node]];
  return c.empty() ? 0 : plan_.rank[c.back()] + 1;
}

void TreeGrower::add_children(uint32_t node, std::span<const int32_t> ranked,
                              const std::function<bool(uint32_t)>& keep) {
  for (uint32_t child : plan_children_[planned_[node]]) {
    const uint32_t r = plan_.rank[child];
    if (r >= ranked.size() || !keep(r)) continue;
    out_.tokens.push_back(ranked[r]);
    out_.parents.push_back(int32_t(node));
    out_.rank.push_back(r);
    planned_.push_back(child);
  }
}

bool TreeGrower::next_level() {
  begin_ = end_;
  end_ = uint32_t(out_.tokens.size());
  ++depth_;
  return end_ > begin_;
}

}  // namespace strata::spec
