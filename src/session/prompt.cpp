#include "session/prompt.h"

namespace strata::session {

std::vector<int32_t> encode_prompt(const tokenizer::Tokenizer& tok, const std::string& text,
                                   tokenizer::ChatFamily family, const std::string& system) {
  if (family == tokenizer::ChatFamily::none) return tok.encode(text, true, false);
  // The template is formatted around a marker and the parts are encoded separately.
  const std::string marker = "\x01strata-user-text\x01";
  std::vector<tokenizer::ChatMessage> msgs;
  if (!system.empty()) msgs.push_back({"system", system});
  msgs.push_back({"user", marker});
  const std::string chat = tokenizer::apply_chat(family, msgs, true);
  const size_t at = chat.find(marker);
  std::vector<int32_t> ids = tok.encode(chat.substr(0, at), true, true);
  const auto user = tok.encode(text, false, false);
  const auto tail = tok.encode(chat.substr(at + marker.size()), false, true);
  ids.insert(ids.end(), user.begin(), user.end());
  ids.insert(ids.end(), tail.begin(), tail.end());
  return ids;
}

}  // namespace strata::session
