#include "spec/prompt_lookup.h"

#include <algorithm>

namespace strata::spec {

std::vector<int32_t> lookup_continuation(std::span<const int32_t> history, uint32_t k, uint32_t max_ngram,
                                         uint32_t min_ngram, uint32_t* matched_n) {
  if (matched_n) *matched_n = 0;
  const size_t len = history.size();
  for (uint32_t n = std::min<size_t>(max_ngram, len > 0 ? len - 1 : 0); n >= std::max(1u, min_ngram); --n) {
    const auto tail = history.subspan(len - n);
    // Most recent first: the latest context is the likeliest to continue the same way. A match
    // must end before the last token so that at least one token follows it.
    for (size_t end = len - 1; end >= n; --end) {
      if (!std::equal(tail.begin(), tail.end(), history.begin() + long(end - n))) continue;
      const size_t take = std::min<size_t>(k, len - end);
      if (matched_n) *matched_n = n;
      return {history.begin() + long(end), history.begin() + long(end + take)};
    }
  }
  return {};
}

Status PromptLookup::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  out.tokens = lookup_continuation(history, k, max_, min_);
  return {};
}

}  // namespace strata::spec
