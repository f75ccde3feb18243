// Replay drafting, for measuring speculation at a chosen acceptance (`strata bench spec --replay`):
// synthetic weights accept every early-exit draft (or none), which says nothing about the speed a
// real model would see. A replay drafter proposes the tokens of a recorded plain greedy run, each
// one right with probability A (else a different token), so verification, rollback, KV writes
// and every cost of the real system are measured and only the drafter's choices are simulated.
//
// Each position's outcome is a fixed function of (seed, position): independent Bernoulli(A) per
// drafted position, the same if the position is drafted again in a later round, so runs are
// reproducible. With `cost`, the real drafter (e.g. early exit at depth d) runs first for its
// forward passes (its time and KV writes are real) and its tokens are then replaced; verification
// then starts from layer 0 (its hidden states belong to its own tokens), which costs the d resident
// layers once more per pass than a real early-exit round: a slightly pessimistic figure.
// Token trees (propose_tree) replay the same outcomes on their top-token spine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "spec/drafter.h"

namespace strata::spec {

class ReplayDrafter final : public Drafter {
 public:
  // reference: prompt + the plain greedy continuation; acceptance in [0, 1]; n_vocab >= 2.
  ReplayDrafter(std::vector<int32_t> reference, double acceptance, uint64_t seed, uint32_t n_vocab,
                std::unique_ptr<Drafter> cost = nullptr);
  std::string_view name() const override { return name_; }
  // Up to k tokens of the reference after history (fewer at its end); none when history has left
  // the reference (sampling, or a different engine).
  Status propose(std::span<const int32_t> history, uint32_t k, Draft& out) override;
  // Whether the drafted token at `position` (an index into the reference) is the right one.
  bool right_at(size_t position) const;
  // Trees: the candidate of rank r after a node on the reference is right with probability A
  // when the ranks before it were wrong (rank 0: right_at, so a tree's top-token spine is the
  // chain's draft; ranks >= kMaxRank: never), independently per (position, rank); off-reference
  // nodes get wrong tokens. The cost drafter, if any, drafts the plan first (its passes are real,
  // its tokens are replaced; verification then starts from layer 0, as for chains).
  static constexpr uint32_t kMaxRank = 8;
  int32_t right_rank(size_t position) const;  // -1: no rank is right
  bool drafts_trees() const override { return true; }
  Status propose_tree(std::span<const int32_t> history, const TreePlan& plan, TreeDraft& out) override;

 private:
  std::vector<int32_t> ref_;
  double acceptance_;
  uint64_t seed_;
  uint32_t n_vocab_;
  std::unique_ptr<Drafter> cost_;
  std::string name_;
};

}  // namespace strata::spec
