// Which layers a layer-subset draft skips (SWIFT-style self-speculation, no training): a set of
// candidate skip sets ("arms"), and an online policy that picks one per round from observed
// acceptance and measured draft-step cost.
//
// Candidates. The first and last layers always run (the embedding's and the head's neighbours
// matter most); of the middle layers [1, n_layer - 1) a ratio r in {0.25, 0.4, 0.5} (or the one
// --spec subset:skip=R fixes) is skipped, round(r x middle) layers (at least 1), in three patterns:
//   alt   evenly spaced ("every other" at r = 0.5),
//   mid   one contiguous block centred in the middle,
//   late  one contiguous block ending just before the last layer.
// Duplicate masks (small models) are dropped. Where the engine's placement keeps some layers out of
// VRAM, every candidate skips those too (subset_candidates' must_skip).
//
// Policy (deterministic given the seed and the observations):
//   value(arm) = expected_tokens(a_arm, k) / (k * t_step(arm) + t_verify(k + 1))
// with a_arm the arm's running per-token acceptance (adaptive.h AcceptanceEstimate) and
// t_step(arm) a least-squares fit of measured step time against layers run, shared by all arms
// (before any measurement: t_full_step x layers run / n_layer). Rounds:
//   1. warm-up: every arm once, the default arm (alt at the middle ratio) first, then the rest
//      in a seeded shuffled order;
//   2. exploration, up to `budget` rounds in all: epsilon-greedy, epsilon decaying linearly from
//      `epsilon` to 0, a uniformly drawn arm (seeded) otherwise the best value;
//   3. settled: the best value. The estimates keep updating, so a settled arm whose acceptance
//      collapses is replaced by the next best (whose stale estimate now rates higher).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "spec/adaptive.h"

namespace strata::spec {

struct SkipSet {
  std::string label;          // "alt 0.50: skip 2,4,6,8,10"
  std::vector<uint8_t> skip;  // one entry per layer, 1 = skipped
  uint32_t layers_run = 0;
};

enum class SkipPattern { alt, mid, late };

// round(ratio x (n_layer - 2)) middle layers (clamped to [1, n_layer - 2]) in the pattern.
// n_layer >= 3 (there is a middle).
SkipSet make_skip_set(uint32_t n_layer, double ratio, SkipPattern pattern);

// The ratios x patterns above, deduplicated; the first is the default (alt at the middle ratio).
// must_skip (empty, or one entry per layer, 1 = not resident: a weight block of the layer streams,
// comes from disk or runs on the CPU, runtime::Engine::non_resident_layers): every candidate also
// skips those layers, so that a draft step moves no weight bytes over PCIe (M12's "resident"
// drafter), and the first candidate ("resident") skips exactly them. Candidates that would run no
// layer are dropped; where nothing is left, the unrestricted candidates are returned.
std::vector<SkipSet> subset_candidates(uint32_t n_layer, std::span<const double> ratios,
                                       std::span<const uint8_t> must_skip = {});

inline constexpr double kDefaultSkipRatios[] = {0.25, 0.4, 0.5};

class SubsetChooser {
 public:
  struct Policy {
    uint32_t budget = 48;   // rounds of warm-up plus exploration
    double epsilon = 0.25;  // exploration probability at the end of warm-up
  };
  // arms: non-empty, arms[0] the default; all of one model (n_layer entries per mask).
  SubsetChooser(std::vector<SkipSet> arms, uint64_t seed, Policy policy);
  SubsetChooser(std::vector<SkipSet> arms, uint64_t seed) : SubsetChooser(std::move(arms), seed, Policy{}) {}

  // The arm for the next round of k drafts (counts a round). t_verify: a verify pass over k + 1
  // rows; t_full_step: a one-token pass of every layer (the step-cost prior).
  size_t choose(uint32_t k, double t_verify, double t_full_step);
  // The best value now, without counting a round or drawing.
  size_t best(uint32_t k, double t_verify, double t_full_step) const;
  double value(size_t arm, uint32_t k, double t_verify, double t_full_step) const;

  void observe_acceptance(size_t arm, uint32_t drafted, uint32_t accepted);
  void observe_step(size_t arm, double seconds);  // one draft step (one token through the arm's layers)

  double alpha(size_t arm) const { return accept_[arm].alpha(); }
  double step_seconds(size_t arm, double t_full_step) const;
  const SkipSet& arm(size_t i) const { return arms_[i]; }
  size_t size() const { return arms_.size(); }
  uint64_t rounds() const { return rounds_; }
  bool settled() const { return rounds_ >= std::max<uint64_t>(policy_.budget, arms_.size()); }

 private:
  std::vector<SkipSet> arms_;
  Policy policy_;
  Rng rng_;
  std::vector<size_t> warmup_order_;
  std::vector<AcceptanceEstimate> accept_;
  CostEstimate step_cost_;  // seconds per step against layers run
  uint32_t n_layer_;
  uint64_t rounds_ = 0;
};

}  // namespace strata::spec
