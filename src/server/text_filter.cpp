#include "server/text_filter.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace strata::server {

bool TextFilter::append(std::string_view piece) {
  if (stopped_) return true;
  text_ += piece;
  // A match cannot start before sent_: text that could begin one was held back, never sent.
  size_t first = std::string::npos;
  for (const auto& s : stop_)
    first = std::min(first, text_.find(s, sent_));
  if (first != std::string::npos) {
    text_.resize(first);
    stopped_ = true;
  }
  return stopped_;
}

size_t TextFilter::held_back() const {
  size_t hold = 0;
  const std::string_view t = std::string_view(text_).substr(sent_);
  for (const auto& s : stop_)
    for (size_t k = std::min(s.size() - 1, t.size()); k > hold; --k)
      if (t.substr(t.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
  return hold;
}

std::string TextFilter::take() {
  size_t end = text_.size() - (stopped_ ? 0 : held_back());
  end = sent_ + tokenizer::utf8_complete_prefix(std::string_view(text_).substr(sent_, end - sent_));
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

std::string TextFilter::flush() {
  std::string out = text_.substr(sent_);
  sent_ = text_.size();
  return out;
}

}  // namespace strata::server
