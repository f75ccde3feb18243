// OpenAI's response bodies for one request: the whole completion (non-streamed), and the chunks
// of a streamed one (server-sent events: "data: {chunk}\n\n" ..., then "data: [DONE]\n\n"). The
// shapes are what the official clients parse: text_completion / chat.completion objects, chunks
// with a "delta" for chat, a last chunk with finish_reason, and usage where asked for.
//
// logprobs (when the request asked, else null): completions in OpenAI's legacy shape, {tokens,
// token_logprobs, top_logprobs: [{piece: logprob}], text_offset} (text_offset counts code points of
// the generated text, the prompt not included); chat in the chat shape, {content: [{token,
// logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}. A chunk carries its own tokens'.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/logprobs.h"
#include "server/request.h"
#include "server/ticket.h"

namespace strata::server {

class Response {
 public:
  // logprobs: whether the request asked for them (CompletionRequest::logprobs >= 0).
  Response(Endpoint endpoint, std::string model, bool logprobs = false);

  std::string complete(const std::string& text, const std::vector<TokenLogprob>& lp, const std::string& finish_reason,
                       const Usage& u) const;
  // One SSE event with `delta` and its tokens' logprobs (the first chat chunk also carries the
  // assistant role).
  std::string chunk(const std::string& delta, const std::vector<TokenLogprob>& lp = {});
  // The last content event: finish_reason, no text.
  std::string final_chunk(const std::string& finish_reason) const;
  // stream_options.include_usage: an event with empty choices and the usage.
  std::string usage_chunk(const Usage& u) const;
  static std::string done() { return "data: [DONE]\n\n"; }
  // A failure after the stream started (status already sent): an event with an error object.
  static std::string error_event(const std::string& message);

 private:
  Endpoint endpoint_;
  bool logprobs_;
  std::string model_, id_;
  int64_t created_;
  bool role_sent_ = false;
};

}  // namespace strata::server
