// The generated text as a client may see it. Token pieces are appended as they are decoded;
// take() hands out what is safe to send: complete UTF-8 only, and never text that might be the
// start of a stop string (it is held back until it no longer can be). When a stop string is
// complete, the text ends just before it, as OpenAI's `stop` does. Not thread-safe: one per session.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::server {

class TextFilter {
 public:
  explicit TextFilter(std::vector<std::string> stop) : stop_(std::move(stop)) {}
  // Appends a piece; true when a stop string has now appeared (the generation should end).
  bool append(std::string_view piece);
  // The safe text not taken yet.
  std::string take();
  // At the end of the generation: everything not taken yet (held-back text included).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }  // everything visible so far, stop string excluded
  size_t sent() const { return sent_; }              // bytes of text() handed out by take() / flush()

 private:
  size_t held_back() const;  // bytes at the end that are a proper prefix of a stop string

  std::vector<std::string> stop_;
  std::string text_;
  size_t sent_ = 0;
  bool stopped_ = false;
};

}  // namespace strata::server
