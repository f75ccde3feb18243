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

}  // namespace

Response::Response(Endpoint endpoint, std::string model) : endpoint_(endpoint), model_(std::move(model)) {
  static std::atomic<uint64_t> next_id{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  created_ = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  // Unique within this process and across restarts (the start time is part of it).
  id_ = fmt::format("{}-{:x}{:04x}", endpoint == Endpoint::chat ? "chatcmpl" : "cmpl",
                    std::chrono::duration_cast<std::chrono::microseconds>(now).count(), next_id++ & 0xffff);
}

std::string Response::complete(const std::string& text, const std::string& finish_reason, const Usage& u) const {
  ordered_json choice = {{"index", 0}};
  if (endpoint_ == Endpoint::chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  ordered_json j = {{"id", id_},
                    {"object", endpoint_ == Endpoint::chat ? "chat.completion" : "text_completion"},
                    {"created", created_},
                    {"model", model_},
                    {"choices", ordered_json::array({choice})},
                    {"usage", usage_json(u)}};
  return dump(j);
}

std::string Response::chunk(const std::string& delta) {
  ordered_json choice = {{"index", 0}};
  if (endpoint_ == Endpoint::chat) {
    choice["delta"] = {{"content", delta}};
    if (!role_sent_) choice["delta"]["role"] = "assistant";
    role_sent_ = true;
  } else {
    choice["text"] = delta;
  }
  choice["logprobs"] = nullptr;
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
