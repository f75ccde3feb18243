#include "runtime/token_tree.h"

namespace strata::runtime {

Result<TreeShape> TreeShape::create(std::span<const int32_t> parents, uint32_t max_nodes) {
  // Visibility is a 64-bit word per node (kernels/cpu/attention_tree.h), whatever max_nodes says.
  const uint32_t limit = max_nodes < 64 ? max_nodes : 64;
  if (parents.empty() || parents.size() > limit)
    return Status::error("token tree takes 1..{} nodes (got {})", limit, parents.size());
  TreeShape t;
  t.parents_.assign(parents.begin(), parents.end());
  t.depth_.resize(parents.size());
  t.anc_.resize(parents.size());
  for (size_t i = 0; i < parents.size(); ++i) {
    const int32_t p = parents[i];
    if (p < -1 || p >= int32_t(i))
      return Status::error("token tree: node {} has parent {} (must be -1 or an earlier node)", i, p);
    t.depth_[i] = p < 0 ? 0 : t.depth_[size_t(p)] + 1;
    t.anc_[i] = (p < 0 ? 0 : t.anc_[size_t(p)]) | (uint64_t(1) << i);
  }
  return t;
}

uint64_t TreeShape::visible(uint32_t i, uint32_t window) const {
  if (window == 0 || depth_[i] < window) return anc_[i];
  uint64_t bits = 0;
  for (int32_t j = int32_t(i); j >= 0; j = parents_[size_t(j)])
    if (depth_[i] - depth_[size_t(j)] < window) bits |= uint64_t(1) << j;
  return bits;
}

Status TreeShape::check_path(std::span<const uint32_t> path) const {
  for (size_t j = 0; j < path.size(); ++j) {
    const uint32_t node = path[j];
    if (node >= size())
      return Status::error("tree path entry {}: node {} is not in the tree of {} nodes", j, node, size());
    const int32_t want = j == 0 ? -1 : int32_t(path[j - 1]);
    if (parents_[node] != want)
      return j == 0 ? Status::error("tree path entry 0: node {} is not a root (its parent is {})", node, parents_[node])
                    : Status::error("tree path entry {}: node {} is not a child of node {}", j, node, path[j - 1]);
  }
  return {};
}

}  // namespace strata::runtime
