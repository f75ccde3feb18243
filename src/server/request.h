// The body of POST /v1/completions and /v1/chat/completions, parsed and checked before anything
// reaches the scheduler. Fields as OpenAI documents them; unknown fields are ignored (clients send
// many: frequency_penalty, user, logit_bias, ...), a known field of the wrong type or out of range
// is a 400 naming the field, and null counts as absent (some clients send nulls for defaults).
// Sampling defaults are strata generate's (runtime::SamplerParams), so a request that sets only
// temperature 0 decodes exactly as `strata generate --temp 0`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"
#include "server/api_error.h"
#include "tokenizer/chat_template.h"

namespace strata::server {

enum class Endpoint { completions, chat };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;                               // echoed back; the server serves one model
  std::string prompt;                              // completions
  std::vector<tokenizer::ChatMessage> messages;    // chat
  uint32_t max_tokens = 0;                         // after the default and the cap
  runtime::SamplerParams sp;                       // sp.seed set (random when the request has none)
  std::vector<std::string> stop;                   // generation ends before the first of these
  bool stream = false;
  bool include_usage = false;                      // stream_options.include_usage: a last chunk with usage
  // Log-probabilities (server/logprobs.h): -1 not asked; otherwise each token's logprob and its
  // position's `logprobs` most likely tokens, 0..kMaxTopLogprobs. Completions: `logprobs: N`; chat:
  // `logprobs: true` with `top_logprobs: N` (0 when absent).
  int32_t logprobs = -1;
};

struct RequestLimits {
  uint32_t max_tokens = 512;  // --max-tokens: the default and the most a request may ask for
  size_t max_stop = 16;       // stop strings per request
};

// Parses `body` for `endpoint`. Errors are 400s naming the field (invalid JSON included).
std::optional<ApiError> parse_request(std::string_view body, Endpoint endpoint, const RequestLimits& limits,
                                      CompletionRequest& out);

}  // namespace strata::server
