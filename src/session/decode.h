// The step loop of one sequence: the prompt, then rounds of the decoder (plain or speculative,
// spec/speculative_decoder.h) until the token limit, end of text, a full context or a stop
// request. generate streams what it yields; bench spec collects it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "core/status.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "spec/speculative_decoder.h"
#include "tokenizer/tokenizer.h"

namespace strata::session {

struct DecodeLimits {
  int32_t n_predict = -1;   // tokens to generate; -1: until end of text or a full context
  bool ignore_eos = false;  // keep going past end-of-generation tokens
};

struct DecodeResult {
  int32_t n_gen = 0;              // tokens generated (an end-of-text token counts, and is not emitted)
  const char* stop = "length";    // "length" | "end of text" | "interrupted" | "context full"
  double prompt_s = 0, gen_s = 0; // wall time of the prompt (with the first token) and of the rounds after it
  uint64_t streamed_bytes = 0;    // weight bytes the engine streamed during the rounds
  double host_compute_s = 0;      // CPU seconds of host-tier work during the rounds
};

// The decoder for `sampler` on `engine` with the session's --spec. Errors: the config does not fit
// the engine (a usage error).
Result<std::unique_ptr<spec::SpeculativeDecoder>> make_decoder(runtime::Engine& engine, runtime::Sampler& sampler,
                                                               const spec::SpecConfig& config);

// Runs `prompt` and then rounds of `dec` (speculative rounds may overshoot n_predict and end of text:
// the extra tokens are dropped). on_token gets each emitted token in order; stop_requested is polled
// between rounds (may be empty). tok: decides end of text (null: never). Errors: engine failure.
Result<DecodeResult> decode(runtime::Engine& engine, spec::SpeculativeDecoder& dec, std::span<const int32_t> prompt,
                            const tokenizer::Tokenizer* tok, const DecodeLimits& limits,
                            const std::function<void(int32_t)>& on_token,
                            const std::function<bool()>& stop_requested = {});

}  // namespace strata::session
