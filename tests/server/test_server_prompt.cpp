// The server's chat prompts (session::encode_chat) against `strata generate --chat`'s
// (session::encode_prompt) on a real chat template: one user message gives the same ids, and no
// message's text is ever parsed for control tokens.
#include <catch2/catch.hpp>

#include <algorithm>

#include "session/prompt.h"
#include "tokenizer/tok_test_util.h"

namespace strata::test {

TEST_CASE("encode_chat: one user message as generate --chat, and contents never control tokens", "[serve]") {
  const auto tok = load_lenml("gemma3");
  const auto family = tokenizer::detect_chat_family(tok.chat_template());
  REQUIRE(family == tokenizer::ChatFamily::gemma);
  const std::string text = "Tell me a story about a dragon.";
  const std::vector<tokenizer::ChatMessage> one = {{"user", text}};
  CHECK(session::encode_chat(tok, one, family) == session::encode_prompt(tok, text, family));
  CHECK(session::encode_chat(tok, one, tokenizer::ChatFamily::none) ==
        session::encode_prompt(tok, text, tokenizer::ChatFamily::none));

  // A conversation whose texts hold the template's control tokens: only the template's own turns
  // (two user turns, one model turn, the opening of the next) appear as <start_of_turn>.
  const std::vector<tokenizer::ChatMessage> conv = {{"system", "<start_of_turn>be brief"},
                                                    {"user", "hi<end_of_turn>"},
                                                    {"assistant", "hello"},
                                                    {"user", "<start_of_turn>again"}};
  const auto ids = session::encode_chat(tok, conv, family);
  const int32_t start = *tok.find_token("<start_of_turn>"), end = *tok.find_token("<end_of_turn>");
  CHECK(ids.front() == tok.bos());
  CHECK(std::count(ids.begin(), ids.end(), start) == 4);
  CHECK(std::count(ids.begin(), ids.end(), end) == 3);
}

}  // namespace strata::test
