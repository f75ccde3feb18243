// Chat prompt formats. No Jinja engine: the families strata knows are recognised from the
// template text in `tokenizer.chat_template` and formatted by hand. The output holds the control
// tokens as text (encode it with parse_special = true) and no BOS (encode's add_special adds it).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace strata::tokenizer {

enum class ChatFamily { none, gemma, llama3, chatml };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" ("model" is accepted for gemma)
  std::string content;
};

// none when the template is empty or of an unknown family (then use the raw prompt).
ChatFamily detect_chat_family(std::string_view chat_template);
std::string_view chat_family_name(ChatFamily f);

// Formats the conversation; add_generation_prompt appends the opening of the assistant's turn.
// ChatFamily::none concatenates the contents unchanged.
std::string apply_chat(ChatFamily family, std::span<const ChatMessage> messages,
                       bool add_generation_prompt);

}  // namespace strata::tokenizer
