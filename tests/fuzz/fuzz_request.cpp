// Fuzz target: the server's request parser (server/request.h), fed every body a client can send,
// and the text filter that streams generated text past stop strings. Every body must end in a
// request or an OpenAI error: what parses must hold the ranges the scheduler relies on, an error
// must be a 4xx whose body is JSON. The filter must hand out exactly its text, never a stop string,
// and the logprobs entries held back with it (server/logprobs.h) come out in order, each once, with
// offsets inside the text, all of them unless a stop string cut the text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/logprobs.h"
#include "server/request.h"
#include "server/text_filter.h"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const server::RequestLimits limits{64, 4};
  for (auto ep : {server::Endpoint::completions, server::Endpoint::chat}) {
    server::CompletionRequest r;
    if (auto e = server::parse_request(body, ep, limits, r)) {
      if (e->status < 400 || e->status >= 500) __builtin_trap();
      if (nlohmann::json::parse(e->body(), nullptr, false).is_discarded()) __builtin_trap();
      continue;
    }
    if (r.max_tokens < 1 || r.max_tokens > limits.max_tokens || r.stop.size() > limits.max_stop) __builtin_trap();
    if (r.logprobs < -1 || r.logprobs > int32_t(server::kMaxTopLogprobs)) __builtin_trap();
    if (!r.sp.validate().is_ok()) __builtin_trap();
    if (ep == server::Endpoint::chat ? r.messages.empty() : r.prompt.empty()) __builtin_trap();
    for (const auto& s : r.stop)
      if (s.empty()) __builtin_trap();

    // The prompt's bytes as a generation, in pieces of 1..4 bytes, past the request's stop strings.
    const std::string text = ep == server::Endpoint::chat ? r.messages[0].content : r.prompt;
    server::TextFilter f(r.stop);
    server::PendingLogprobs lp;
    std::string out;
    int32_t pushed = 0, next = 0;  // entries pushed; the id the next released entry must have
    size_t last_offset = 0;
    auto check = [&](const std::vector<server::TokenLogprob>& released) {
      for (const auto& t : released) {
        if (t.chosen.id != next++ || t.text_offset < last_offset || t.text_offset > f.text().size()) __builtin_trap();
        last_offset = t.text_offset;
      }
    };
    for (size_t i = 0; i < text.size() && !f.stopped(); i += 1 + i % 4) {
      const std::string_view piece = std::string_view(text).substr(i, 1 + i % 4);
      f.append(piece);
      server::TokenLogprob t;
      t.chosen.id = pushed++;
      lp.push(t, piece.size());
      out += f.take();
      check(lp.release(f.text(), f.sent()));
    }
    out += f.flush();
    check(lp.release_rest(f.text()));
    if (out != f.text()) __builtin_trap();
    if (!f.stopped() && next != pushed) __builtin_trap();
    for (const auto& s : r.stop)
      if (out.find(s) != std::string::npos) __builtin_trap();
  }
  return 0;
}
