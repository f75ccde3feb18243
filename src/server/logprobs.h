// Log-probabilities of generated tokens, for the `logprobs` request fields (completions:
// `logprobs: N`; chat: `logprobs: true, top_logprobs: N`).
//
// Which distribution: the raw model's, log-softmax of the logits the engine returned for the
// position, before the sampler's penalties, temperature, top-k/top-p/min-p, as llama-server and
// vLLM report them. So a greedy token's logprob is always its position's top entry, and the values
// are the same whatever the request's sampling settings (they agree with `strata logits`).
//
// Alignment with the text: TextFilter holds back text (an unfinished UTF-8 character, the start of
// a possible stop string); PendingLogprobs holds back each token's entry until its whole piece has
// been released, so a streamed chunk carries the entries of exactly the tokens its text completes,
// and a token that lies wholly inside a stop string is never reported. Not thread-safe: one per
// session, on the scheduler thread.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::server {

inline constexpr uint32_t kMaxTopLogprobs = 20;  // OpenAI's limit for top_logprobs

struct TokenAlt {
  int32_t id = 0;
  std::string piece;  // the token's bytes (may be part of a UTF-8 character)
  double logprob = 0;
};

struct TokenLogprob {
  TokenAlt chosen;
  std::vector<TokenAlt> top;  // the n most likely, most likely first (ties: lower id first)
  size_t text_offset = 0;     // index of the code point of the generated text where this token starts (set on release)
};

// The chosen token's log-probability and the n_top most likely tokens of one position's logits
// (pieces left empty: the caller names them). n_top <= kMaxTopLogprobs; chosen < logits.size().
TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, uint32_t n_top);

class PendingLogprobs {
 public:
  // A generated token: its entry, and its piece as appended to the TextFilter.
  void push(TokenLogprob t, size_t piece_bytes);
  // The entries of the tokens whose pieces lie within the first `sent` bytes of `text` (TextFilter
  // text() and sent()), in order, with their text offsets.
  std::vector<TokenLogprob> release(std::string_view text, size_t sent);
  // At the end of the generation: every entry that starts before the end of `text` (all of them
  // unless a stop string cut the text).
  std::vector<TokenLogprob> release_rest(std::string_view text);

 private:
  struct Held {
    TokenLogprob t;
    size_t start = 0, end = 0;  // byte range of its piece in the TextFilter's text
  };
  void take_front(std::string_view text, std::vector<TokenLogprob>& out);

  std::deque<Held> held_;
  size_t appended_ = 0;  // bytes of every piece pushed
  size_t counted_bytes_ = 0, counted_chars_ = 0;  // text_offset: code points in text[0, counted_bytes_)
};

}  // namespace strata::server
