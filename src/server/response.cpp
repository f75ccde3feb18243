#include "server/response.h"

#include <atomic>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace strata::server {
namespace {

using nlohmann::ordered_json;

// Generated text may end inside a UTF-8 character (max_tokens cut it): replace, never throw.
std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }
std::string event(const ordered_json& j) { return "data: " + dump(j) + "\n\n"; }

ordered_json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ordered_json bytes_json(const std::string& piece) {
  ordered_json b = ordered_json::array();
  for (char c : piece) b.push_back(int(uint8_t(c)));
  return b;
}

// The chat shape: one entry per token.
ordered_json chat_logprobs(const std::vector<TokenLogprob>& lp) {
  ordered_json content = ordered_json::array();
  for (const TokenLogprob& t : lp) {
    ordered_json top = ordered_json::array();
    for (const TokenAlt& a : t.top)
      top.push_back({{"token", a.piece}, {"logprob", a.logprob}, {"bytes", bytes_json(a.piece)}});
    content.push_back({{"token", t.chosen.piece},
                       {"logprob", t.chosen.logprob},
                       {"bytes", bytes_json(t.chosen.piece)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// The legacy completions shape: parallel arrays. top_logprobs maps pieces to logprobs, so two
// tokens with the same piece (a byte token and a character token) keep only the likelier one.
ordered_json completion_logprobs(const std::vector<TokenLogprob>& lp) {
  ordered_json tokens = ordered_json::array(), values = ordered_json::array(), tops = ordered_json::array(),
               offsets = ordered_json::array();
  for (const TokenLogprob& t : lp) {
    tokens.push_back(t.chosen.piece);
    values.push_back(t.chosen.logprob);
    ordered_json top = ordered_json::object();
    for (const TokenAlt& a : t.top)
      if (!top.contains(a.piece)) top[a.piece] = a.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

ordered_json logprobs_json(Endpoint endpoint, bool asked, const std::vector<TokenLogprob>& lp) {
  if (!asked) return nullptr;
  return endpoint == Endpoint::chat ? chat_logprobs(lp) : completion_logprobs(lp);
}

}  // namespace

Response::Response(Endpoint endpoint, std::string model, bool logprobs)
    : endpoint_(endpoint), logprobs_(logprobs), model_(std::move(model)) {
  static std::atomic<uint64_t> next_id{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  created_ = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  // Unique within this process and across restarts (the start time is part of it).
  id_ = fmt::format("{}-{:x}{:04x}", endpoint == Endpoint::chat ? "chatcmpl" : "cmpl",
                    std::chrono::duration_cast<std::chrono::microseconds>(now).count(), next_id++ & 0xffff);
}

std::string Response::complete(const std::string& text, const std::vector<TokenLogprob>& lp,
                               const std::string& finish_reason, const Usage& u) const {
  ordered_json choice = {{"index", 0}};
  if (endpoint_ == Endpoint::chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  choice["logprobs"] = logprobs_json(endpoint_, logprobs_, lp);
  choice["finish_reason"] = finish_reason;
  ordered_json j = {{"id", id_},
                    {"object", endpoint_ == Endpoint::chat ? "chat.completion" : "text_completion"},
                    {"created", created_},
                    {"model", model_},
                    {"choices", ordered_json::array({choice})},
                    {"usage", usage_json(u)}};
  return dump(j);
}

std::string Response::chunk(const std::string& delta, const std::vector<TokenLogprob>& lp) {
  ordered_json choice = {{"index", 0}};
  if (endpoint_ == Endpoint::chat) {
    choice["delta"] = {{"content", delta}};
    if (!role_sent_) choice["delta"]["role"] = "assistant";
    role_sent_ = true;
  } else {
    choice["text"] = delta;
  }
  choice["logprobs"] = logprobs_json(endpoint_, logprobs_, lp);
  choice["finish_reason"] = nullptr;
  return event({{"id", id_},
                {"object", endpoint_ == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", ordered_json::array({choice})}});
}

std::string Response::final_chunk(const std::string& finish_reason) const {
  ordered_json choice = {{"index", 0}};
  if (endpoint_ == Endpoint::chat)
    choice["delta"] = ordered_json::object();
  else
    choice["text"] = "";
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  return event({{"id", id_},
                {"object", endpoint_ == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", ordered_json::array({choice})}});
}

std::string Response::usage_chunk(const Usage& u) const {
  return event({{"id", id_},
                {"object", endpoint_ == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", ordered_json::array()},
                {"usage", usage_json(u)}});
}

std::string Response::error_event(const std::string& message) {
  return event({{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
}

}  // namespace strata::server
