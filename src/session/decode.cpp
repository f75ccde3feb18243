#include "session/decode.h"

#include <chrono>
#include <mutex>

#include "core/log.h"

namespace strata::session {

Result<std::unique_ptr<spec::SpeculativeDecoder>> make_decoder(runtime::Engine& engine, runtime::Sampler& sampler,
                                                               const spec::SpecConfig& config) {
  // Said once per process (a server makes a decoder per session): the flag asked for trees and
  // this decoder verifies chains.
  static std::once_flag said;
  if (config.tree > 0 && !engine.supports_trees())
    std::call_once(said, [&] {
      log::info("--spec {}: this {} engine has no token trees (they need the CPU engine, or CUDA with f16/q8/q4 KV "
                "and no host compute; a server: its sequence 0); it verifies chains", config.text(), engine.device_name());
    });
  return spec::SpeculativeDecoder::create(engine, sampler, config);
}

Result<DecodeResult> decode(runtime::Engine& f, spec::SpeculativeDecoder& dec, std::span<const int32_t> prompt,
                            const tokenizer::Tokenizer* tok, const DecodeLimits& limits,
                            const std::function<void(int32_t)>& on_token,
                            const std::function<bool()>& stop_requested) {
  DecodeResult r;
  const auto t0 = std::chrono::steady_clock::now();
  auto first = dec.start(prompt);  // the prompt, and the first token from its logits
  if (!first) return first.status();
  const auto t1 = std::chrono::steady_clock::now();
  const uint64_t streamed0 = f.streamed_bytes();
  const double host0 = f.host_compute_seconds();
  // Each round yields one or more tokens.
  std::vector<int32_t> round{*first};
  for (bool done = limits.n_predict == 0; !done;) {
    for (int32_t next : round) {
      ++r.n_gen;
      if (!limits.ignore_eos && tok && tok->is_eog(next)) { r.stop = "end of text"; done = true; break; }
      on_token(next);
      if (limits.n_predict >= 0 && r.n_gen >= limits.n_predict) { done = true; break; }
    }
    if (done) break;
    if (stop_requested && stop_requested()) { r.stop = "interrupted"; break; }
    if (f.n_past() >= f.n_ctx()) { r.stop = "context full"; break; }
    round.clear();
    const uint32_t left = limits.n_predict < 0 ? UINT32_MAX : uint32_t(limits.n_predict - r.n_gen);
    STRATA_TRY(dec.step(left, round));
  }
  const auto t2 = std::chrono::steady_clock::now();
  r.prompt_s = std::chrono::duration<double>(t1 - t0).count();
  r.gen_s = std::chrono::duration<double>(t2 - t1).count();
  r.streamed_bytes = f.streamed_bytes() - streamed0;
  r.host_compute_s = f.host_compute_seconds() - host0;
  return r;
}

}  // namespace strata::session
