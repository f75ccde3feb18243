// A prompt as token ids: plain, or inside the model's chat template (tokenizer/chat_template.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::session {

// family none: text with BOS. Otherwise the template around one user message (after a system
// message when `system` is not empty), ready for the assistant's turn. The template's own control
// tokens are parsed; the user's text never is, so a prompt that contains "<end_of_turn>" cannot end
// its turn.
std::vector<int32_t> encode_prompt(const tokenizer::Tokenizer& tok, const std::string& text,
                                   tokenizer::ChatFamily family, const std::string& system = {});

// A whole conversation inside the template (family none: the contents concatenated, with BOS),
// ready for the assistant's turn: the server's chat completions. Every message's content is
// encoded without parsing control tokens, the template's text with; for one user message this is
// encode_prompt's result, so a chat request matches `strata generate --chat`.
std::vector<int32_t> encode_chat(const tokenizer::Tokenizer& tok, std::span<const tokenizer::ChatMessage> messages,
                                 tokenizer::ChatFamily family);

}  // namespace strata::session
