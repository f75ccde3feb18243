#include "spec/replay.h"

#include <algorithm>

#include <fmt/format.h>

#include "spec/tree_grower.h"

namespace strata::spec {
namespace {

// splitmix64: a position's outcome and wrong token, independent of the rounds' order.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

ReplayDrafter::ReplayDrafter(std::vector<int32_t> reference, double acceptance, uint64_t seed, uint32_t n_vocab,
                             std::unique_ptr<Drafter> cost)
    : ref_(std::move(reference)), acceptance_(std::clamp(acceptance, 0.0, 1.0)), seed_(seed),
      n_vocab_(std::max(2u, n_vocab)), cost_(std::move(cost)) {
  name_ = cost_ ? fmt::format("replay:a={:g}+{}", acceptance_, cost_->name()) : fmt::format("replay:a={:g}", acceptance_);
}

bool ReplayDrafter::right_at(size_t position) const {
  // 53 random bits as a uniform in [0, 1).
  const double u = double(mix(seed_ ^ mix(position)) >> 11) * 0x1.0p-53;
  return u < acceptance_;
}

int32_t ReplayDrafter::right_rank(size_t position) const {
  if (right_at(position)) return 0;
  for (uint32_t r = 1; r < kMaxRank; ++r) {
    const double u = double(mix(seed_ ^ mix(position) ^ mix(0x7ee0000ull + r)) >> 11) * 0x1.0p-53;
    if (u < acceptance_) return int32_t(r);
  }
  return -1;
}

Status ReplayDrafter::propose_tree(std::span<const int32_t> history, const TreePlan& plan, TreeDraft& out) {
  if (history.empty()) return Status::error("replay tree: no pending token");
  out = TreeDraft{};
  // The cost drafter's passes over the plan are real (time, KV writes); its tokens are not used.
  if (cost_ && cost_->drafts_trees()) STRATA_TRY(cost_->propose_tree(history, plan, out));
  const uint32_t steps = out.engine_steps;
  auto levels = std::move(out.levels);
  out = TreeDraft{};
  out.engine_steps = steps;
  out.levels = std::move(levels);
  TreeGrower grow(plan, history.back(), out);
  const size_t next = history.size();
  // Nodes on the reference (the root is, while history follows it); their children at position
  // next + depth are judged against it.
  const bool follows = next <= ref_.size() && std::equal(history.begin(), history.end(), ref_.begin());
  std::vector<uint8_t> on_ref{uint8_t(follows)};
  std::vector<int32_t> ranked;
  do {
    const size_t p = next + grow.depth();
    for (uint32_t i = grow.level_begin(); i < grow.level_end(); ++i) {
      const uint32_t w = grow.wanted(i);
      if (w == 0 || p >= ref_.size() || !follows) continue;
      const int32_t right = ref_[p], hit = on_ref[i] ? right_rank(p) : -1;
      ranked.clear();
      for (uint32_t r = 0; r < w; ++r) {
        // A wrong candidate: another token, by (position, rank, node) hash (never the right one).
        const uint32_t offset = 1 + uint32_t(mix((seed_ + 0x5eed) ^ mix(p) ^ mix(uint64_t(r) << 32 | i)) % (n_vocab_ - 1));
        ranked.push_back(int32_t(r) == hit ? right : int32_t((uint32_t(right) + offset) % n_vocab_));
      }
      grow.add_children(i, ranked, [](uint32_t) { return true; });
    }
    for (size_t c = on_ref.size(); c < out.tokens.size(); ++c)
      on_ref.push_back(on_ref[size_t(out.parents[c])] && out.tokens[c] == ref_[p]);
  } while (grow.next_level());
  return {};
}

Status ReplayDrafter::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  if (cost_) {
    STRATA_TRY(cost_->propose(history, k, out));
    out.tokens.clear();
    out.hidden.clear();
    out.verify_from = 0;
  }
  const size_t next = history.size();
  if (next == 0 || next > ref_.size() || !std::equal(history.begin(), history.end(), ref_.begin())) return {};
  for (size_t p = next; p < std::min(ref_.size(), next + k); ++p) {
    const int32_t right = ref_[p];
    if (right_at(p)) {
      out.tokens.push_back(right);
    } else {
      // Any other token, picked by the position's hash (never the right one).
      const uint32_t offset = 1 + uint32_t(mix((seed_ + 0x5eed) ^ mix(p)) % (n_vocab_ - 1));
      out.tokens.push_back(int32_t((uint32_t(right) + offset) % n_vocab_));
    }
  }
  return {};
}

}  // namespace strata::spec
