#include "model/synth_vocab.h"

#include <fmt/format.h>

#include "core/status.h"

namespace strata::model {

SynthVocab make_synth_vocab(uint32_t n_vocab) {
  STRATA_CHECK(n_vocab >= kSynthMinVocab, "vocab {} < {}", n_vocab, kSynthMinVocab);
  SynthVocab v;
  v.tokens.reserve(n_vocab);
  auto add = [&](std::string piece, float score, int32_t type) {
    v.tokens.push_back(std::move(piece));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<pad>", 0, 3);
  add("<eos>", 0, 3);
  add("<bos>", 0, 3);
  add("<unk>", 0, 2);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, 6);
  const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's space marker
  float score = -1.0f;
  add(space, score, 1);
  for (char c = 33; c < 127; ++c) add(std::string(1, c), score -= 0.01f, 1);
  // Letter strings of length 1, 2, 3, ... each as "▁abc" then "abc", until the vocab is full.
  for (int len = 1; v.tokens.size() < n_vocab; ++len) {
    std::string s(len, 'a');
    while (v.tokens.size() < n_vocab) {
      add(space + s, score -= 0.001f, 1);
      if (v.tokens.size() < n_vocab && len > 1) add(s, score -= 0.001f, 1);
      int i = len - 1;  // odometer over 'a'..'z'
      while (i >= 0 && s[i] == 'z') s[i--] = 'a';
      if (i < 0) break;
      ++s[i];
    }
  }
  return v;
}

}  // namespace strata::model
