// Throughput mode on the CPU engine: Engine::eval_batch decodes one token of several sequences in
// one pass over the weights, and every row must be bit-identical to decoding that sequence alone
// (greedy, on synthetic gemma3 models whose sliding-window rings wrap, and on the testdata models),
// with sequences of different prompt lengths that start and stop at different steps. Also:
// truncate per sequence, several rows of one sequence in a step, and the errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <map>
#include <span>

#include "core/rng.h"
#include "runtime/cpu_forward.h"
#include "runtime/batch_test_util.h"
#include "spec/spec_test_util.h"
#include "logits_compare.h"
#include "test_util.h"

using namespace strata;
using test::alone;
using test::check_batched;
using test::random_prompt;
using test::same_bits;
using Plan = test::BatchPlan;

namespace {

std::unique_ptr<runtime::CpuForward> cpu_engine(std::shared_ptr<const runtime::Model> model, uint32_t n_seq,
                                                GgmlType kv = GgmlType::F32, uint32_t n_ctx = 160,
                                                uint32_t ubatch = 16, bool int8 = false) {
  runtime::ForwardOptions o{.n_ctx = n_ctx, .ubatch = ubatch, .k_type = kv, .v_type = kv, .placement = {}, .trace = {}};
  o.n_seq = n_seq;
  o.cpu_int8 = int8;
  auto e = runtime::CpuForward::create(std::move(model), o);
  INFO((e.is_ok() ? std::string() : e.message()));
  REQUIRE(e.is_ok());
  return std::move(*e);
}

std::shared_ptr<const runtime::Model> load(const std::string& path) {
  auto m = runtime::Model::load(path);
  INFO((m.is_ok() ? std::string() : m.message()));
  REQUIRE(m.is_ok());
  return *m;
}

}  // namespace

TEST_CASE("eval_batch: every row is bit-identical to decoding its sequence alone (synthetic gemma3, rings wrap)",
          "[runtime][batch]") {
  // int8: ForwardOptions::cpu_int8 (the Q8_0 weights take the int8-activation kernels).
  for (bool int8 : {false, true})
  for (GgmlType w : {GgmlType::Q8_0, GgmlType::F32}) {
    for (GgmlType kv : {GgmlType::F32, GgmlType::Q8_0}) {
      INFO("weights " << ggml_type_info(w).name << " kv " << ggml_type_info(kv).name << (int8 ? " int8" : ""));
      auto model = load(test::small_spec_model(11, w));
      const uint32_t n_vocab = model->spec.hp.n_vocab;
      auto ref = cpu_engine(model, 1, kv, 160, 16, int8);
      auto e = cpu_engine(model, 10, kv, 160, 16, int8);
      Rng rng(uint64_t(w) * 31 + uint64_t(kv));
      // Different prompt lengths, starts and lengths; 70+ positions wrap the 16 + 16 slot rings.
      // Up to 10 rows a step: past kGemmMinTokens, where eval() would take the SGEMM path.
      std::vector<Plan> plans = {{random_prompt(rng, 1, n_vocab), 0, 75},  {random_prompt(rng, 9, n_vocab), 0, 20},
                                 {random_prompt(rng, 24, n_vocab), 3, 60}, {random_prompt(rng, 5, n_vocab), 7, 12},
                                 {random_prompt(rng, 17, n_vocab), 21, 40}, {random_prompt(rng, 2, n_vocab), 22, 1},
                                 {random_prompt(rng, 6, n_vocab), 0, 50},  {random_prompt(rng, 3, n_vocab), 1, 45},
                                 {random_prompt(rng, 12, n_vocab), 2, 33}, {random_prompt(rng, 4, n_vocab), 5, 50}};
      check_batched(*e, *ref, plans, 5);
      // The engine is reusable: a second round on the same sequences (truncate(s, 0) restarts).
      std::vector<Plan> again = {{random_prompt(rng, 3, n_vocab), 0, 30}, {random_prompt(rng, 30, n_vocab), 0, 30}};
      check_batched(*e, *ref, again, 6);
    }
  }
}

TEST_CASE("eval_batch: bit-identical rows on the testdata models (gemma3 sliding window, llama, qwen3)",
          "[runtime][batch]") {
  for (const char* dir : {"gemma3-swa", "gemma3-swa-q4k", "llama", "qwen3"}) {
    INFO(dir);
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    auto model = load(base + "model.gguf");
    const uint32_t n_vocab = model->spec.hp.n_vocab;
    auto ref = cpu_engine(model, 1, GgmlType::F32, 128, 16);
    auto e = cpu_engine(model, 4, GgmlType::F32, 128, 16);
    Rng rng(3);
    // 48 positions: past the 16-token window of the gemma3 models (their rings wrap).
    std::vector<Plan> plans = {{random_prompt(rng, 4, n_vocab), 0, 44}, {random_prompt(rng, 11, n_vocab), 0, 10},
                               {random_prompt(rng, 1, n_vocab), 2, 30}, {random_prompt(rng, 7, n_vocab), 12, 20}};
    check_batched(*e, *ref, plans, 9);
  }
}

TEST_CASE("eval_batch: several rows of one sequence in a step equal decoding them one by one", "[runtime][batch]") {
  auto model = load(test::small_spec_model(12, GgmlType::Q8_0));
  const uint32_t n_vocab = model->spec.hp.n_vocab;
  auto ref = cpu_engine(model, 1);
  auto e = cpu_engine(model, 3);
  const std::vector<int32_t> p0 = {5, 6, 7}, p1 = {100, 3};
  std::vector<float> l;
  REQUIRE(e->eval(0, p0, runtime::Logits::last, l).is_ok());
  REQUIRE(e->eval(1, p1, runtime::Logits::last, l).is_ok());
  // Row order: 0, 1, 0, 0 -> sequence 0 at positions 3, 4, 5 and sequence 1 at 2.
  const std::vector<runtime::BatchRow> rows = {{0, 40}, {1, 41}, {0, 42}, {0, 43}};
  std::vector<float> got;
  REQUIRE(e->eval_batch(rows, got).is_ok());
  CHECK(e->n_past(0) == 6);
  CHECK(e->n_past(1) == 3);
  CHECK(e->n_past(2) == 0);
  std::vector<float> want;
  ref->truncate(0);
  REQUIRE(ref->eval(p0, runtime::Logits::last, want).is_ok());
  for (int32_t t : {40, 42, 43}) {
    REQUIRE(ref->eval(std::span(&t, 1), runtime::Logits::last, want).is_ok());
    const size_t row = t == 40 ? 0 : t == 42 ? 2 : 3;
    CHECK(same_bits(std::span(got).subspan(row * n_vocab, n_vocab), want));
  }
  ref->truncate(0);
  REQUIRE(ref->eval(p1, runtime::Logits::last, want).is_ok());
  const int32_t t = 41;
  REQUIRE(ref->eval(std::span(&t, 1), runtime::Logits::last, want).is_ok());
  CHECK(same_bits(std::span(got).subspan(n_vocab, n_vocab), want));
}

TEST_CASE("eval_batch: truncate acts on one sequence and decoding resumes exactly", "[runtime][batch]") {
  auto model = load(test::small_spec_model(13, GgmlType::Q8_0));
  const uint32_t n_vocab = model->spec.hp.n_vocab;
  auto ref = cpu_engine(model, 1);
  auto e = cpu_engine(model, 2);
  const std::vector<int32_t> pa = {1, 2, 3, 4}, pb = {9, 8};
  const auto want_a = alone(*ref, pa, 40), want_b = alone(*ref, pb, 40);
  std::vector<float> la, lb, logits;
  REQUIRE(e->eval(0, pa, runtime::Logits::last, la).is_ok());
  REQUIRE(e->eval(1, pb, runtime::Logits::last, lb).is_ok());
  std::vector<int32_t> toks_b;  // sequence 1's generated tokens
  // 30 steps together: positions past the ring size (16 + 16).
  for (int i = 1; i < 30; ++i) {
    const std::vector<runtime::BatchRow> rows = {{0, runtime::argmax(la)}, {1, runtime::argmax(lb)}};
    toks_b.push_back(rows[1].token);
    REQUIRE(e->eval_batch(rows, logits).is_ok());
    la.assign(logits.begin(), logits.begin() + n_vocab);
    lb.assign(logits.begin() + n_vocab, logits.end());
    REQUIRE(same_bits(la, want_a[i]));
    REQUIRE(same_bits(lb, want_b[i]));
  }
  // Roll sequence 1 back by 10 positions (less than the ring margin); sequence 0 is untouched.
  const uint32_t past_a = e->n_past(0), past_b = e->n_past(1);
  e->truncate(1, past_b - 10);
  CHECK(e->n_past(0) == past_a);
  CHECK(e->n_past(1) == past_b - 10);
  e->truncate(1, past_b + 5);  // truncate never grows a sequence
  CHECK(e->n_past(1) == past_b - 10);
  // Sequence 1 replays the same tokens from there; both continue to match decoding alone.
  const size_t replay_from = toks_b.size() - 10;
  for (size_t j = replay_from; j < toks_b.size(); ++j) {
    const std::vector<runtime::BatchRow> rows = {{1, toks_b[j]}};
    REQUIRE(e->eval_batch(rows, logits).is_ok());
    REQUIRE(same_bits(logits, want_b[j + 1]));
  }
  CHECK(e->n_past(1) == past_b);
  const std::vector<runtime::BatchRow> rows = {{1, runtime::argmax(want_b[29])}, {0, runtime::argmax(la)}};
  REQUIRE(e->eval_batch(rows, logits).is_ok());
  CHECK(same_bits(std::span(logits).subspan(0, n_vocab), want_b[30]));
  CHECK(same_bits(std::span(logits).subspan(n_vocab, n_vocab), want_a[30]));
  // The single-sequence API is sequence 0.
  CHECK(e->n_past() == e->n_past(0));
  e->truncate(3);
  CHECK(e->n_past(0) == 3);
  CHECK(e->n_past(1) == past_b + 1);
}

TEST_CASE("eval_batch: bad rows are refused and leave every sequence as it was", "[runtime][batch]") {
  auto model = load(test::small_spec_model(14, GgmlType::Q8_0));
  const int32_t n_vocab = int32_t(model->spec.hp.n_vocab);
  auto e = cpu_engine(model, 3, GgmlType::F32, 32, 4);
  std::vector<float> l;
  REQUIRE(e->eval(0, std::vector<int32_t>{1, 2, 3}, runtime::Logits::last, l).is_ok());
  REQUIRE(e->eval(1, std::vector<int32_t>(31, 7), runtime::Logits::last, l).is_ok());
  using R = std::vector<runtime::BatchRow>;
  struct Case { R rows; const char* expect; };
  const Case cases[] = {
      {R{}, "1..16 rows (got 0)"},
      {R(17, {2, 1}), "1..16 rows (got 17)"},
      {R{{0, 1}, {3, 1}}, "sequence 3 is out of range (the engine holds 3)"},
      {R{{0, 1}, {2, n_vocab}}, "token id 356 is out of range"},
      {R{{0, -1}}, "token id -1 is out of range"},
      {R{{0, 1}, {1, 1}, {1, 1}}, "context of sequence 1 full"},
      {R{{2, 1}, {2, 1}, {2, 1}, {2, 1}, {2, 1}}, "more than ubatch (4) rows of sequence 2"},
  };
  for (const auto& c : cases) {
    INFO(c.expect);
    Status s = e->eval_batch(c.rows, l);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.message().find(c.expect) != std::string::npos);
    CHECK(e->n_past(0) == 3);
    CHECK(e->n_past(1) == 31);
    CHECK(e->n_past(2) == 0);
  }
  CHECK(e->eval(3, std::vector<int32_t>{1}, runtime::Logits::last, l).message().find("sequence 3 is out of range") !=
        std::string::npos);
  // Within the limits: rows of several sequences, at most ubatch (4) of each.
  REQUIRE(e->eval_batch(R{{0, 1}, {2, 1}, {0, 2}, {2, 2}, {0, 3}, {2, 3}, {0, 4}, {2, 4}, {1, 5}}, l).is_ok());
  CHECK(l.size() == 9 * size_t(n_vocab));
  CHECK(e->n_past(0) == 7);
  CHECK(e->n_past(1) == 32);
  CHECK(e->n_past(2) == 4);
  runtime::ForwardOptions o;
  o.n_ctx = 32;
  o.n_seq = 0;
  CHECK(runtime::CpuForward::create(model, o).message().find("number of sequences must be positive") !=
        std::string::npos);
  // Each sequence has its own cache: the KV bytes grow with n_seq.
  CHECK(e->kv_bytes_per_seq() == e->kv(0).bytes());
  CHECK(e->kv_bytes_per_seq() ==
        runtime::kv_bytes_per_seq(model->spec, 32, 4, GgmlType::F32, GgmlType::F32));
}

TEST_CASE("int8 CPU matmuls (--cpu-matmul int8) stay close to the exact engine and change its decode arithmetic",
          "[runtime][batch]") {
  auto model = load(test::testdata("models/gemma3-swa-q4k/model.gguf"));
  const auto tokens = test::read_tokens(test::testdata("models/gemma3-swa-q4k/tokens.txt"));
  REQUIRE(tokens.size() >= 24);
  auto exact = cpu_engine(model, 1, GgmlType::F32, 160, 16, false);
  auto int8 = cpu_engine(model, 1, GgmlType::F32, 160, 16, true);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 20);
  std::vector<float> a, b;
  REQUIRE(exact->eval(prompt, runtime::Logits::last, a).is_ok());
  REQUIRE(int8->eval(prompt, runtime::Logits::last, b).is_ok());
  // Decode steps: the int8 path runs (n = 1), so the logits move, but by the activation rounding only.
  double max_abs = 0, max_diff = 0;
  size_t moved = 0;
  for (size_t i = 20; i < 24; ++i) {
    REQUIRE(exact->eval(std::span(&tokens[i], 1), runtime::Logits::last, a).is_ok());
    REQUIRE(int8->eval(std::span(&tokens[i], 1), runtime::Logits::last, b).is_ok());
    for (size_t v = 0; v < a.size(); ++v) {
      max_abs = std::max(max_abs, std::fabs(double(a[v])));
      max_diff = std::max(max_diff, std::fabs(double(a[v]) - double(b[v])));
      moved += a[v] != b[v];
    }
  }
  CHECK(moved > 0);                   // the int8 kernels did run
  CHECK(max_diff <= 0.05 * max_abs);  // 8-bit activations: about 1% of the largest logit here
}
