// Runs of an engine that the GPU tests compare between residencies (resident vs streamed, disk,
// cpu-tier, host KV): the same token sequence through different plans.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "model/synth.h"
#include "runtime/engine.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "test_util.h"

namespace strata::test {

// A gemma3 1b-shaped synthetic model (Q4_K) written to a temporary folder `dir` and loaded: big
// enough for plans that stream, spill to disk and wrap sliding-window rings.
inline Result<std::shared_ptr<const runtime::Model>> synthetic_gemma3_1b(const std::string& dir) {
  const auto path = (temp_dir(dir) / "g1b-q4k.gguf").string();
  model::SynthOptions so;
  so.arch = model::Arch::gemma3;
  so.preset = "1b";
  so.type = GgmlType::Q4_K;
  so.progress = false;
  REQUIRE(model::apply_preset(so).is_ok());
  auto written = model::write_synthetic_model(so, path);
  INFO((written.is_ok() ? std::string() : written.message()));
  REQUIRE(written.is_ok());
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  return model;
}

// Prompt (the first n_prompt tokens) in chunks with all logits, then the remaining tokens one by
// one (last logits), concatenated: prefill and decode paths in one vector.
inline std::vector<float> run_prompt_then_decode(runtime::Engine& e, const std::vector<int32_t>& tokens,
                                                 size_t n_prompt) {
  std::vector<float> all, one;
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + n_prompt);
  Status s = e.eval(prompt, runtime::Logits::all, all);
  INFO((s.is_ok() ? std::string() : s.message()));
  REQUIRE(s.is_ok());
  for (size_t i = n_prompt; i < tokens.size(); ++i) {
    s = e.eval(std::span(&tokens[i], 1), runtime::Logits::last, one);
    INFO((s.is_ok() ? std::string() : s.message()));
    REQUIRE(s.is_ok());
    all.insert(all.end(), one.begin(), one.end());
  }
  return all;
}

// Greedy decoding from a fresh sequence, with each step's margin: where rounding differences
// between plans (CPU vs GPU kernels) may legitimately flip the choice.
struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<double> gap;          // per step: (top-1 - top-2) / max |logit|
  std::vector<float> first_logits;  // after the prompt
};

inline Greedy greedy_with_gaps(runtime::Engine& e, const std::vector<int32_t>& prompt, uint32_t n) {
  Greedy g;
  e.truncate(0);
  std::vector<float> logits;
  Status s = e.eval(prompt, runtime::Logits::last, logits);
  INFO((s.is_ok() ? std::string() : s.message()));
  REQUIRE(s.is_ok());
  g.first_logits = logits;
  for (uint32_t i = 0; i < n; ++i) {
    const int32_t next = runtime::argmax(logits);
    double top2 = -1e30, max_abs = 0;
    for (size_t v = 0; v < logits.size(); ++v) {
      max_abs = std::max(max_abs, std::fabs(double(logits[v])));
      if (int32_t(v) != next) top2 = std::max(top2, double(logits[v]));
    }
    g.tokens.push_back(next);
    g.gap.push_back((double(logits[next]) - top2) / std::max(max_abs, 1e-30));
    s = e.eval(std::span(&next, 1), runtime::Logits::last, logits);
    INFO((s.is_ok() ? std::string() : s.message()));
    REQUIRE(s.is_ok());
  }
  return g;
}

}  // namespace strata::test
