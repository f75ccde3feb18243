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

std::vector<int32_t> encode_chat(const tokenizer::Tokenizer& tok, std::span<const tokenizer::ChatMessage> messages,
                                 tokenizer::ChatFamily family) {
  if (family == tokenizer::ChatFamily::none) {  // as encode_prompt: one text with BOS
    std::string text;
    for (const auto& m : messages) text += m.content;
    return tok.encode(text, true, false);
  }
  // Each content is replaced by a numbered marker; the template's text between markers is encoded
  // with control tokens parsed, the contents without.
  auto marker = [](size_t i) { return "\x01strata-text-" + std::to_string(i) + "\x01"; };
  std::vector<tokenizer::ChatMessage> msgs;
  for (size_t i = 0; i < messages.size(); ++i) msgs.push_back({messages[i].role, marker(i)});
  const std::string chat = tokenizer::apply_chat(family, msgs, true);
  std::vector<int32_t> ids;
  size_t from = 0;
  bool first = true;  // the first piece of template text carries BOS, as in encode_prompt
  auto append = [&](const std::string& text, bool parse_special) {
    const auto part = tok.encode(text, first, parse_special);
    first = false;
    ids.insert(ids.end(), part.begin(), part.end());
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string m = marker(i);
    const size_t at = chat.find(m, from);
    if (at == std::string::npos) continue;  // a family that drops a role (none keeps all)
    append(chat.substr(from, at - from), true);
    from = at + m.size();
    append(messages[i].content, false);
  }
  append(chat.substr(from), true);
  return ids;
}

}  // namespace strata::session
