// Shared by the CPU and GPU throughput-mode tests: sequences decoded alone (the reference) and
// the same sequences decoded together through Engine::eval_batch, compared bit for bit.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <span>
#include <vector>

#include "core/rng.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace strata::test {

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Greedy decoding of one sequence alone (n_seq 1): the logits after the prompt and after each of
// the first n - 1 generated tokens.
inline std::vector<std::vector<float>> alone(runtime::Engine& e, const std::vector<int32_t>& prompt, uint32_t n) {
  e.truncate(0);
  std::vector<std::vector<float>> out(1);
  REQUIRE(e.eval(prompt, runtime::Logits::last, out[0]).is_ok());
  while (out.size() < n) {
    const int32_t t = runtime::argmax(out.back());
    std::vector<float> l;
    REQUIRE(e.eval(std::span(&t, 1), runtime::Logits::last, l).is_ok());
    out.push_back(std::move(l));
  }
  return out;
}

struct BatchPlan {
  std::vector<int32_t> prompt;
  uint32_t start = 0;  // the batched step at which the sequence is prefilled
  uint32_t n = 0;      // logits to produce (prefill + n - 1 decode steps)
};

// Runs the plans in throughput mode on `e` (one sequence per plan) and checks every row against
// the sequence decoded alone on `ref`. Rows are shuffled each step: the order must not matter.
inline void check_batched(runtime::Engine& e, runtime::Engine& ref, const std::vector<BatchPlan>& plans, uint64_t seed) {
  REQUIRE(e.n_seq() >= plans.size());
  std::vector<std::vector<std::vector<float>>> want;
  for (const auto& p : plans) want.push_back(alone(ref, p.prompt, p.n));
  std::vector<std::vector<float>> last(plans.size());
  std::vector<uint32_t> got(plans.size(), 0);  // logits produced so far per sequence
  Rng rng(seed);
  const uint32_t n_vocab = e.model().spec.hp.n_vocab;
  size_t checked = 0;
  for (uint32_t step = 0;; ++step) {
    bool pending = false;
    std::vector<runtime::BatchRow> rows;
    for (uint32_t s = 0; s < plans.size(); ++s) {
      if (step == plans[s].start) {
        e.truncate(s, 0);
        REQUIRE(e.eval(s, plans[s].prompt, runtime::Logits::last, last[s]).is_ok());
        REQUIRE(e.n_past(s) == plans[s].prompt.size());
        CHECK(same_bits(last[s], want[s][0]));
        got[s] = 1;
      }
      if (step < plans[s].start || got[s] < plans[s].n) pending = true;
      if (step >= plans[s].start && got[s] >= 1 && got[s] < plans[s].n)
        rows.push_back({s, runtime::argmax(last[s])});
    }
    if (!pending) break;
    if (rows.empty()) continue;
    for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[rng.next_u32() % i]);
    std::vector<uint32_t> past;
    for (uint32_t s = 0; s < plans.size(); ++s) past.push_back(e.n_past(s));
    std::vector<float> logits;
    Status st = e.eval_batch(rows, logits);
    INFO((st.is_ok() ? std::string() : st.message()));
    REQUIRE(st.is_ok());
    REQUIRE(logits.size() == rows.size() * n_vocab);
    for (size_t i = 0; i < rows.size(); ++i) {
      const uint32_t s = rows[i].seq;
      INFO("step " << step << " sequence " << s << " token " << got[s]);
      last[s].assign(logits.begin() + i * n_vocab, logits.begin() + (i + 1) * n_vocab);
      CHECK(same_bits(last[s], want[s][got[s]]));
      CHECK(e.n_past(s) == past[s] + 1);
      ++got[s];
      ++checked;
    }
  }
  CHECK(checked > 0);
}

inline std::vector<int32_t> random_prompt(Rng& rng, uint32_t len, uint32_t n_vocab) {
  std::vector<int32_t> p(len);
  for (auto& t : p) t = int32_t(rng.next_u32() % n_vocab);
  return p;
}

}  // namespace strata::test
