// The estimates `--spec auto` chooses a drafter and a draft length from (speculative_decoder.h
// states the rule). All of them forget the past geometrically, so they follow a sequence whose
// predictability changes (a summary copying the prompt, then free text).
#pragma once

#include <cstdint>

namespace strata::spec {

// Per-token acceptance a of a drafter, modelling a round as independent acceptances until the
// first rejection: the estimate is accepted / (accepted + rejections), with a weak prior.
class AcceptanceEstimate {
 public:
  explicit AcceptanceEstimate(double prior = 0.6, double prior_weight = 2, double decay = 0.97)
      : accepted_(prior * prior_weight), rejected_(prior_weight - prior * prior_weight), decay_(decay) {}
  // A round that drafted `drafted` tokens of which the first `accepted` were accepted.
  void observe(uint32_t drafted, uint32_t accepted);
  double alpha() const { return accepted_ / (accepted_ + rejected_); }

 private:
  double accepted_, rejected_, decay_;
};

// Seconds of a pass over `rows` tokens as intercept + slope * rows: a decayed least-squares fit.
// With one distinct row count seen so far the slope is prior_slope times the mean cost per pass.
class CostEstimate {
 public:
  explicit CostEstimate(double prior_slope = 0.05, double decay = 0.97) : prior_slope_(prior_slope), decay_(decay) {}
  void observe(uint32_t rows, double seconds);
  bool known() const { return w_ > 0; }
  double predict(uint32_t rows) const;

 private:
  double prior_slope_, decay_;
  double w_ = 0, sn_ = 0, snn_ = 0, st_ = 0, snt_ = 0;  // decayed sums of 1, n, n^2, t, n t
};

// Expected tokens from a round that drafts k tokens with per-token acceptance a: the accepted
// prefix plus the verifier's own token, 1 + a + ... + a^k.
double expected_tokens(double a, uint32_t k);

}  // namespace strata::spec
