// Prompt lookup (n-gram) drafting: find the most recent earlier occurrence of the sequence's last
// n tokens (n = max_ngram down to min_ngram, longest first) and propose the tokens that followed
// it. Free (no forward pass) and strong when the output copies from the prompt: summaries,
// extraction, code edits.
#pragma once

#include "spec/drafter.h"

namespace strata::spec {

// The continuation (at most k tokens) after the most recent earlier match of history's last n
// tokens, for the longest n in [min_ngram, max_ngram] that matches; empty when none does.
// matched_n (optional) receives that n (0 when nothing matched).
std::vector<int32_t> lookup_continuation(std::span<const int32_t> history, uint32_t k, uint32_t max_ngram,
                                         uint32_t min_ngram, uint32_t* matched_n = nullptr);

class PromptLookup final : public Drafter {
 public:
  explicit PromptLookup(uint32_t max_ngram = 4, uint32_t min_ngram = 1) : max_(max_ngram), min_(min_ngram) {}
  std::string_view name() const override { return "lookup"; }
  Status propose(std::span<const int32_t> history, uint32_t k, Draft& out) override;

 private:
  uint32_t max_, min_;
};

}  // namespace strata::spec
