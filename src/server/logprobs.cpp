#include "server/logprobs.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace strata::server {

TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, uint32_t n_top) {
  assert(chosen >= 0 && size_t(chosen) < logits.size() && n_top <= kMaxTopLogprobs);
  // log-sum-exp in double, as runtime::log_softmax computes it, without a vector of n_vocab.
  double mx = logits[0];
  for (float l : logits) mx = std::max(mx, double(l));
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  const double lse = mx + std::log(sum);

  TokenLogprob t;
  t.chosen = {chosen, {}, double(logits[size_t(chosen)]) - lse};
  const size_t n = std::min<size_t>(n_top, logits.size());
  if (n == 0) return t;
  // The n best in one pass: a small sorted list (n <= 20), greater logit first, ties by lower id.
  std::vector<int32_t> best;
  best.reserve(n + 1);
  auto before = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  for (int32_t id = 0; id < int32_t(logits.size()); ++id) {
    if (best.size() == n && !before(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
    if (best.size() > n) best.pop_back();
  }
  for (int32_t id : best) t.top.push_back({id, {}, double(logits[size_t(id)]) - lse});
  return t;
}

void PendingLogprobs::push(TokenLogprob t, size_t piece_bytes) {
  held_.push_back({std::move(t), appended_, appended_ + piece_bytes});
  appended_ += piece_bytes;
}

void PendingLogprobs::take_front(std::string_view text, std::vector<TokenLogprob>& out) {
  Held& h = held_.front();
  // Code points start at every byte that is not a continuation byte (10xxxxxx). A token that
  // starts inside a character (a byte-level piece) is at that character's index.
  auto continuation = [&](size_t i) { return (uint8_t(text[i]) & 0xC0) == 0x80; };
  for (; counted_bytes_ < h.start && counted_bytes_ < text.size(); ++counted_bytes_)
    counted_chars_ += !continuation(counted_bytes_);
  const bool inside = h.start < text.size() && continuation(h.start) && counted_chars_ > 0;
  h.t.text_offset = counted_chars_ - inside;
  out.push_back(std::move(h.t));
  held_.pop_front();
}

std::vector<TokenLogprob> PendingLogprobs::release(std::string_view text, size_t sent) {
  std::vector<TokenLogprob> out;
  while (!held_.empty() && held_.front().end <= sent) take_front(text, out);
  return out;
}

std::vector<TokenLogprob> PendingLogprobs::release_rest(std::string_view text) {
  std::vector<TokenLogprob> out;
  // A token that starts at or after the cut lies inside the stop string (or after it). When the
  // text was not cut, every piece ends within it; an empty piece at its very end counts too.
  while (!held_.empty() && (held_.front().start < text.size() || held_.front().end <= text.size()))
    take_front(text, out);
  held_.clear();
  return out;
}

}  // namespace strata::server
