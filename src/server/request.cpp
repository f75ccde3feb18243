#include "server/request.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/logprobs.h"

namespace strata::server {
namespace {

using nlohmann::json;

// A present, non-null field of `body`, or null when absent.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> type_error(const char* name, const char* want) {
  return bad_request(fmt::format("'{}' must be {}", name, want), name);
}

// Reads an optional number field in [lo, hi] into `out`.
template <typename T>
std::optional<ApiError> number(const json& body, const char* name, double lo, double hi, T& out) {
  const json* v = field(body, name);
  if (!v) return {};
  if (!v->is_number()) return type_error(name, "a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) return bad_request(fmt::format("'{}' is {}, outside [{}, {}]", name, x, lo, hi), name);
  out = T(x);
  return {};
}

std::optional<ApiError> integer(const json& body, const char* name, double lo, double hi, int64_t& out) {
  const json* v = field(body, name);
  if (!v) return {};
  if (!v->is_number_integer()) return type_error(name, "an integer");
  return number(body, name, lo, hi, out);
}

// Chat message content: a string, or OpenAI's array of parts of which only text parts are taken.
std::optional<ApiError> content_text(const json& c, std::string& out) {
  if (c.is_string()) {
    out = c.get<std::string>();
    return {};
  }
  if (!c.is_array()) return type_error("messages[].content", "a string or an array of text parts");
  for (const json& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      return bad_request("only text content parts are supported", "messages[].content");
    out += part["text"].get<std::string>();
  }
  return {};
}

std::optional<ApiError> parse_messages(const json& body, std::vector<tokenizer::ChatMessage>& out) {
  const json* m = field(body, "messages");
  if (!m) return bad_request("'messages' is required", "messages");
  if (!m->is_array() || m->empty()) return type_error("messages", "a non-empty array");
  for (const json& msg : *m) {
    if (!msg.is_object()) return type_error("messages[]", "an object");
    const json* role = field(msg, "role");
    if (!role || !role->is_string()) return type_error("messages[].role", "a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant")
      return bad_request(fmt::format("unsupported role '{}' (system, developer, user, assistant)", r),
                         "messages[].role");
    std::string text;
    if (const json* c = field(msg, "content"))
      if (auto e = content_text(*c, text)) return e;
    out.push_back({std::move(r), std::move(text)});
  }
  return {};
}

std::optional<ApiError> parse_prompt(const json& body, std::string& out) {
  const json* p = field(body, "prompt");
  if (!p) return bad_request("'prompt' is required", "prompt");
  // OpenAI also takes an array of prompts (one choice each) or token ids: one string only here.
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
  if (!p->is_string()) return type_error("prompt", "a string (or an array of one string)");
  out = p->get<std::string>();
  if (out.empty()) return bad_request("'prompt' is empty", "prompt");
  return {};
}

// completions: `logprobs` an integer N; chat: `logprobs` a boolean and `top_logprobs` N. N in
// [0, kMaxTopLogprobs]; top_logprobs without logprobs true is an error, as OpenAI answers it.
std::optional<ApiError> parse_logprobs(const json& body, Endpoint endpoint, int32_t& out) {
  const double hi = kMaxTopLogprobs;
  int64_t n = -1;
  if (endpoint == Endpoint::completions) {
    if (auto e = integer(body, "logprobs", 0, hi, n)) return e;
    out = int32_t(n);
    return {};
  }
  bool want = false;
  if (const json* l = field(body, "logprobs")) {
    if (!l->is_boolean()) return type_error("logprobs", "a boolean (chat; top_logprobs sets how many)");
    want = l->get<bool>();
  }
  if (auto e = integer(body, "top_logprobs", 0, hi, n)) return e;
  if (n >= 0 && !want) return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  out = want ? int32_t(std::max<int64_t>(n, 0)) : -1;
  return {};
}

std::optional<ApiError> parse_stop(const json& body, size_t max_stop, std::vector<std::string>& out) {
  const json* s = field(body, "stop");
  if (!s) return {};
  if (s->is_string()) {
    out.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    for (const json& x : *s) {
      if (!x.is_string()) return type_error("stop", "a string or an array of strings");
      out.push_back(x.get<std::string>());
    }
  } else {
    return type_error("stop", "a string or an array of strings");
  }
  std::erase(out, std::string{});  // an empty stop string would end every generation at once
  if (out.size() > max_stop) return bad_request(fmt::format("at most {} stop strings", max_stop), "stop");
  return {};
}

}  // namespace

std::optional<ApiError> parse_request(std::string_view body, Endpoint endpoint, const RequestLimits& limits,
                                      CompletionRequest& out) {
  json b = json::parse(body, nullptr, false);
  if (b.is_discarded()) return bad_request("the body is not valid JSON");
  if (!b.is_object()) return bad_request("the body must be a JSON object");
  out = CompletionRequest{};
  out.endpoint = endpoint;
  if (const json* m = field(b, "model")) {
    if (!m->is_string()) return type_error("model", "a string");
    out.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::chat) {
    if (auto e = parse_messages(b, out.messages)) return e;
  } else if (auto e = parse_prompt(b, out.prompt)) {
    return e;
  }

  int64_t max_tokens = limits.max_tokens;
  // Chat clients send max_completion_tokens (max_tokens is deprecated there); either is taken.
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (auto e = integer(b, name, 1, double(limits.max_tokens), max_tokens)) {
      if (field(b, name)->is_number_integer())
        e->message = fmt::format("'{}' must be in [1, {}] (the server's --max-tokens)", name, limits.max_tokens);
      return e;
    }
  out.max_tokens = uint32_t(max_tokens);

  auto& sp = out.sp;
  if (auto e = number(b, "temperature", 0, 2, sp.temperature)) return e;
  if (auto e = number(b, "top_p", 0, 1, sp.top_p)) return e;
  if (auto e = number(b, "min_p", 0, 1, sp.min_p)) return e;
  int64_t top_k = sp.top_k;
  if (auto e = integer(b, "top_k", 0, 1e9, top_k)) return e;
  sp.top_k = int32_t(top_k);
  // The seed is read as an integer, not through a double: seeds above 2^53 stay exact.
  if (const json* s = field(b, "seed")) {
    if (!s->is_number_integer()) return type_error("seed", "an integer");
    sp.seed = s->is_number_unsigned() ? s->get<uint64_t>() : uint64_t(s->get<int64_t>());
  } else {
    sp.seed = uint64_t(std::random_device{}()) << 32 | std::random_device{}();
  }

  int64_t n = 1;
  if (auto e = integer(b, "n", 1, 1e9, n)) return e;
  if (n != 1) return bad_request("only n = 1 is supported", "n");
  if (auto e = parse_stop(b, limits.max_stop, out.stop)) return e;
  if (auto e = parse_logprobs(b, endpoint, out.logprobs)) return e;
  if (const json* s = field(b, "stream")) {
    if (!s->is_boolean()) return type_error("stream", "a boolean");
    out.stream = s->get<bool>();
  }
  if (const json* so = field(b, "stream_options")) {
    if (!so->is_object()) return type_error("stream_options", "an object");
    if (const json* u = field(*so, "include_usage")) {
      if (!u->is_boolean()) return type_error("stream_options.include_usage", "a boolean");
      out.include_usage = u->get<bool>();
    }
  }
  if (Status s = sp.validate(); !s) return bad_request(s.message());
  return {};
}

}  // namespace strata::server
