// Shared by the CPU and GPU speculative-decoding tests: a small synthetic gemma3 (sliding
// window 16, so short sequences wrap the KV ring) and greedy generation plain vs speculative.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "model/synth.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "spec/speculative_decoder.h"
#include "test_util.h"

namespace strata::test {

// 4 layers (the 4th global; swa_pattern 2: the 2nd and 4th), n_embd 64, vocabulary 356 (the
// synthetic tokenizer's minimum).
inline std::string small_spec_model(uint64_t seed, GgmlType type, uint32_t swa_pattern = 4) {
  model::SynthOptions o;
  o.arch = model::Arch::gemma3;
  o.preset = "tiny";
  o.type = type;
  o.seed = seed;
  o.progress = false;
  REQUIRE(model::apply_preset(o).is_ok());
  o.hp.n_vocab = 356;
  o.hp.n_embd = 64;
  o.hp.n_layer = 4;
  o.hp.n_head = 2;
  o.hp.n_head_kv = 1;
  o.hp.n_embd_head = 32;
  o.hp.n_ff = 128;
  o.hp.n_swa = 16;
  o.hp.swa_pattern = swa_pattern;
  o.hp.query_pre_attn_scalar = 32;
  // An untied head: with the tied one the scaled embedding dominates the residual stream and a
  // random model only ever repeats its input token (every draft would be accepted).
  o.hp.tied_output = false;
  const auto dir = temp_dir("spec-model");
  const std::string path =
      (dir / fmt::format("spec-{}-{}-swa{}.gguf", seed, ggml_type_info(type).name, swa_pattern)).string();
  auto r = model::write_synthetic_model(o, path);
  INFO((r.is_ok() ? std::string() : r.message()));
  REQUIRE(r.is_ok());
  return path;
}

// n tokens after the prompt: plain decoding (spec none) or speculative; greedy unless sp says otherwise.
inline std::vector<int32_t> generate(runtime::Engine& e, const std::vector<int32_t>& prompt, uint32_t n,
                                     const spec::SpecConfig& cfg, runtime::SamplerParams sp,
                                     spec::SpecStats* stats = nullptr) {
  runtime::Sampler sampler(sp, e.model().spec.hp.n_vocab);
  for (int32_t t : prompt) sampler.accept(t);
  auto dec = spec::SpeculativeDecoder::create(e, sampler, cfg);
  REQUIRE(dec.is_ok());
  auto first = (*dec)->start(prompt);
  REQUIRE(first.is_ok());
  std::vector<int32_t> out{*first};
  while (out.size() < n) {
    Status s = (*dec)->step(uint32_t(n - out.size()), out);
    INFO((s.is_ok() ? std::string() : s.message()));
    REQUIRE(s.is_ok());
  }
  REQUIRE(out.size() == n);
  REQUIRE(e.n_past() + 1 == prompt.size() + n);  // everything but the last token evaluated
  if (stats) *stats = (*dec)->stats();
  return out;
}

inline runtime::SamplerParams greedy_params() {
  runtime::SamplerParams sp;
  sp.temperature = 0;
  return sp;
}

}  // namespace strata::test
