#include "tokenizer/chat_template.h"

namespace strata::tokenizer {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// gemma: no system role; a system message is prepended to the first user turn. Contents are
// trimmed; the assistant's role is "model".
std::string apply_gemma(std::span<const ChatMessage> messages, bool gen) {
  std::string out, system_prefix;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    system_prefix = std::string(trim(messages[0].content)) + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const std::string role = (m.role == "assistant" || m.role == "model") ? "model" : "user";
    out += "<start_of_turn>" + role + "\n";
    if (i == first) out += system_prefix;
    out += trim(m.content);
    out += "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

std::string apply_llama3(std::span<const ChatMessage> messages, bool gen) {
  std::string out;
  for (const auto& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += trim(m.content);
    out += "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string apply_chatml(std::span<const ChatMessage> messages, bool gen) {
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace

ChatFamily detect_chat_family(std::string_view t) {
  if (t.find("<start_of_turn>") != std::string_view::npos) return ChatFamily::gemma;
  if (t.find("<|start_header_id|>") != std::string_view::npos) return ChatFamily::llama3;
  if (t.find("<|im_start|>") != std::string_view::npos) return ChatFamily::chatml;
  return ChatFamily::none;
}

std::string_view chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::none: return "none";
    case ChatFamily::gemma: return "gemma";
    case ChatFamily::llama3: return "llama3";
    case ChatFamily::chatml: return "chatml";
  }
  return "?";
}

std::string apply_chat(ChatFamily family, std::span<const ChatMessage> messages,
                       bool add_generation_prompt) {
  switch (family) {
    case ChatFamily::gemma: return apply_gemma(messages, add_generation_prompt);
    case ChatFamily::llama3: return apply_llama3(messages, add_generation_prompt);
    case ChatFamily::chatml: return apply_chatml(messages, add_generation_prompt);
    case ChatFamily::none: break;
  }
  std::string out;
  for (const auto& m : messages) out += m.content;
  return out;
}

}  // namespace strata::tokenizer
