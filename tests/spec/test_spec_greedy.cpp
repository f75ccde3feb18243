// Greedy speculative decoding must give exactly the text of plain greedy decoding, for every
// drafter, on synthetic models (several seeds and weight types, sequences that wrap the
// sliding-window ring) and on the embedded real model. Also: the layer-range interface the
// early-exit drafter relies on, the prompt-lookup matcher and --spec parsing.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>

#include "runtime/cpu_forward.h"
#include "spec/prompt_lookup.h"
#include "spec_test_util.h"
#include "tokenizer/tokenizer.h"

using namespace strata;

namespace {

std::unique_ptr<runtime::Engine> cpu_engine(const std::string& path, uint32_t n_ctx, uint32_t ubatch) {
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  auto e = runtime::CpuForward::create(*model, {.n_ctx = n_ctx, .ubatch = ubatch, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}});
  REQUIRE(e.is_ok());
  return std::move(*e);
}

spec::SpecConfig config(const std::string& text, uint32_t draft_max, uint32_t n_layer) {
  auto c = spec::parse_spec(text, draft_max, n_layer);
  INFO(text << ": " << (c.is_ok() ? std::string() : c.message()));
  REQUIRE(c.is_ok());
  return *c;
}

}  // namespace

TEST_CASE("spec flag parsing: modes, default depth and one-line errors", "[spec]") {
  CHECK(spec::parse_spec("none", 8, 12)->mode == spec::SpecMode::none);
  CHECK(spec::parse_spec("lookup", 8, 12)->mode == spec::SpecMode::lookup);
  CHECK(spec::parse_spec("early", 8, 12)->depth == 8);
  CHECK(spec::parse_spec("early:d=4", 8, 12)->depth == 4);
  CHECK(spec::parse_spec("auto", 15, 12)->text() == "auto:d=8");
  CHECK(spec::parse_spec("early:d=99", 8, 12).message().find("d=99 must be in [1, 12)") != std::string::npos);
  CHECK(spec::parse_spec("early:d=12", 8, 12).message().find("must be in [1, 12)") != std::string::npos);
  CHECK(spec::parse_spec("early:d=x", 8, 12).message().find("expected early:d=N") != std::string::npos);
  CHECK(spec::parse_spec("subset", 8, 12)->mode == spec::SpecMode::subset);
  CHECK(spec::parse_spec("subset", 8, 12)->skip_ratio == 0);
  CHECK(spec::parse_spec("subset", 8, 12)->text() == "subset");
  CHECK(spec::parse_spec("subset:skip=0.5", 8, 12)->skip_ratio == 0.5);
  CHECK(spec::parse_spec("subset:skip=0.25", 8, 12)->text() == "subset:skip=0.25");
  CHECK(spec::parse_spec("subset:skip=1", 8, 12).message().find("must be in (0, 1)") != std::string::npos);
  CHECK(spec::parse_spec("subset:skip=0", 8, 12).message().find("must be in (0, 1)") != std::string::npos);
  CHECK(spec::parse_spec("subset:d=3", 8, 12).message().find("expected subset:skip=R") != std::string::npos);
  CHECK(spec::parse_spec("subset:skip=0.5x", 8, 12).message().find("expected subset:skip=R") != std::string::npos);
  CHECK(spec::parse_spec("subset", 8, 2).message().find("at least 3 layers") != std::string::npos);
  CHECK(spec::parse_spec("shadow", 8, 12)->shadow_type == GgmlType::Q2_K);
  CHECK(spec::parse_spec("shadow", 8, 12)->text() == "shadow:q2_K");
  CHECK(spec::parse_spec("shadow:Q3_K", 8, 12)->shadow_type == GgmlType::Q3_K);
  CHECK(spec::parse_spec("shadow:q5_x", 8, 12).message().find("unknown shadow type 'q5_x'") != std::string::npos);
  CHECK(spec::parse_spec("medusa", 8, 12)
            .message()
            .find("expected none, early:d=N, subset[:skip=R], shadow[:TYPE], lookup or auto") != std::string::npos);
  CHECK(spec::parse_spec("lookup:d=3", 8, 12).message().find("takes no argument") != std::string::npos);
  CHECK(spec::parse_spec("lookup", 0, 12).message().find("--draft-max must be in [1, 15]") != std::string::npos);
  CHECK(spec::parse_spec("lookup", 16, 12).message().find("--draft-max") != std::string::npos);
}

TEST_CASE("prompt lookup proposes what followed the latest, longest match", "[spec]") {
  using V = std::vector<int32_t>;
  uint32_t n = 0;
  // "1 2 3 9 ... 1 2 3": the 3-gram matches; what followed it (9 8) is proposed.
  CHECK(spec::lookup_continuation(V{1, 2, 3, 9, 8, 5, 1, 2, 3}, 2, 4, 1, &n) == V{9, 8});
  CHECK(n == 3);
  // The latest occurrence wins; the continuation stops at the end of the history.
  CHECK(spec::lookup_continuation(V{7, 1, 4, 7, 1, 5, 7, 1}, 8, 4, 1, &n) == V{5, 7, 1});
  CHECK(n == 2);
  // Longest first: the 2-gram (2 3) beats a later 1-gram match of 3.
  CHECK(spec::lookup_continuation(V{2, 3, 6, 3, 4, 2, 3}, 1, 4, 1) == V{6});
  // No match, or min_ngram too long.
  CHECK(spec::lookup_continuation(V{1, 2, 3, 4}, 4, 4, 1, &n).empty());
  CHECK(n == 0);
  CHECK(spec::lookup_continuation(V{5, 1, 5}, 4, 4, 2).empty());
  CHECK(spec::lookup_continuation(V{5}, 4, 4, 1).empty());
}

TEST_CASE("eval_layers: a draft to layer d plus verification from d equals plain decoding bit for bit", "[spec]") {
  const std::string path = test::small_spec_model(7, GgmlType::Q8_0);
  auto plain = cpu_engine(path, 64, 16);
  auto split = cpu_engine(path, 64, 16);
  const uint32_t n_vocab = plain->model().spec.hp.n_vocab, n_embd = plain->model().spec.hp.n_embd;
  const std::vector<int32_t> prompt = {1, 17, 40, 200, 9};
  const std::vector<int32_t> next = {33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43};  // 11 > kGemmMinTokens rows
  std::vector<float> lp, ls;
  REQUIRE(plain->eval(prompt, runtime::Logits::last, lp).is_ok());
  REQUIRE(split->eval(prompt, runtime::Logits::last, ls).is_ok());
  std::vector<float> want;
  for (int32_t t : next) {
    REQUIRE(plain->eval(std::span(&t, 1), runtime::Logits::last, lp).is_ok());
    want.insert(want.end(), lp.begin(), lp.end());
  }
  // Draft: layers [0, 2) one token at a time, ahead of n_past.
  const uint32_t pos = split->n_past(), d = 2;
  std::vector<float> hidden(next.size() * n_embd), none;
  for (size_t i = 0; i < next.size(); ++i) {
    runtime::LayerRange r{0, d, nullptr, hidden.data() + i * n_embd, {}};
    REQUIRE(split->eval_layers(std::span(&next[i], 1), pos + uint32_t(i), r, runtime::Logits::none, none).is_ok());
    CHECK(split->n_past() == pos);
  }
  // Verify: layers [d, L) over all rows at once.
  std::vector<float> got;
  REQUIRE(split->eval_layers(next, pos, {d, 0, hidden.data(), nullptr, {}}, runtime::Logits::all, got).is_ok());
  CHECK(split->n_past() == pos + next.size());
  REQUIRE(got.size() == next.size() * n_vocab);
  CHECK(got == want);

  // Rollback then a full-range batch from the embedding: the same rows again.
  split->truncate(pos);
  REQUIRE(split->eval_layers(next, pos, {}, runtime::Logits::all, got).is_ok());
  CHECK(got == want);

  // Errors: empty or out-of-model ranges, a missing stream, too many rows, too far ahead.
  std::vector<float> x(16 * n_embd);
  CHECK(split->eval_layers(next, pos, {3, 2, x.data(), nullptr, {}}, runtime::Logits::none, got).message().find("empty") !=
        std::string::npos);
  CHECK(split->eval_layers(next, pos, {0, 9, nullptr, nullptr, {}}, runtime::Logits::none, got).message().find("beyond") !=
        std::string::npos);
  CHECK(split->eval_layers(next, pos, {1, 0, nullptr, nullptr, {}}, runtime::Logits::none, got).message().find(
            "residual stream") != std::string::npos);
  const std::vector<int32_t> many(17, 3);
  CHECK(!split->eval_layers(many, pos, {}, runtime::Logits::none, got).is_ok());
  CHECK(split->eval_layers(next, split->n_past() + 10, {}, runtime::Logits::none, got).message().find("ubatch") !=
        std::string::npos);
}

TEST_CASE("eval_layers with a skip mask: no skips is the full pass, skipping layer j composes ranges", "[spec]") {
  const std::string path = test::small_spec_model(9, GgmlType::Q8_0);
  auto ref = cpu_engine(path, 64, 16);
  auto masked = cpu_engine(path, 64, 16);
  const uint32_t n_layer = ref->model().spec.hp.n_layer, n_embd = ref->model().spec.hp.n_embd;
  const std::vector<int32_t> prompt = {1, 17, 40, 200, 9, 33, 12};
  const std::vector<int32_t> next = {33, 34, 35, 36, 37, 38};
  std::vector<float> lr, lm;
  REQUIRE(ref->eval(prompt, runtime::Logits::last, lr).is_ok());
  REQUIRE(masked->eval(prompt, runtime::Logits::last, lm).is_ok());
  const uint32_t pos = ref->n_past();

  // An all-zero mask is no mask: the full pass bit for bit, and n_past moves.
  const std::vector<uint8_t> none_skipped(n_layer, 0);
  std::vector<float> want, got;
  REQUIRE(ref->eval_layers(next, pos, {}, runtime::Logits::all, want).is_ok());
  REQUIRE(masked->eval_layers(next, pos, {.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr,
                                          .skip = none_skipped},
                              runtime::Logits::all, got)
              .is_ok());
  CHECK(got == want);
  CHECK(masked->n_past() == pos + next.size());
  ref->truncate(pos);
  masked->truncate(pos);

  for (uint32_t j = 1; j + 1 < n_layer; ++j) {
    INFO("skipping layer " << j);
    // Reference: layers [0, j), then [j + 1, L) on the stream leaving layer j - 1.
    std::vector<float> hidden(next.size() * n_embd), none;
    REQUIRE(ref->eval_layers(next, pos, {.first = 0, .end = j, .hidden_in = nullptr, .hidden_out = hidden.data(), .skip = {}},
                             runtime::Logits::none, none)
                .is_ok());
    REQUIRE(ref->eval_layers(next, pos, {.first = j + 1, .end = 0, .hidden_in = hidden.data(), .hidden_out = nullptr, .skip = {}},
                             runtime::Logits::all, want)
                .is_ok());
    ref->truncate(pos);
    std::vector<uint8_t> skip(n_layer, 0);
    skip[j] = 1;
    REQUIRE(masked->eval_layers(next, pos, {.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = skip},
                                runtime::Logits::all, got)
                .is_ok());
    CHECK(got == want);
    CHECK(masked->n_past() == pos);  // a masked pass is a draft: it never completes positions
  }
  // The masked pass's KV is overwritten by a full pass from layer 0: the same logits as never masked.
  REQUIRE(ref->eval_layers(next, pos, {}, runtime::Logits::all, want).is_ok());
  REQUIRE(masked->eval_layers(next, pos, {}, runtime::Logits::all, got).is_ok());
  CHECK(got == want);
  const std::vector<uint8_t> short_mask(n_layer - 1, 1);
  CHECK(masked->eval_layers(next, pos, {.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = short_mask},
                            runtime::Logits::none, got)
            .message()
            .find("skip mask has") != std::string::npos);
}

TEST_CASE("eval_layers on shadow weights: a draft that moves no position, overwritten by the full pass", "[spec]") {
  const std::string path = test::small_spec_model(21, GgmlType::Q8_0);
  auto ref = cpu_engine(path, 64, 16);
  auto e = cpu_engine(path, 64, 16);
  const std::vector<int32_t> prompt = {1, 17, 40, 200, 9, 33, 12};
  const std::vector<int32_t> next = {33, 34, 35, 36};
  const runtime::LayerRange shadow{.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = {}, .shadow = true};
  std::vector<float> want, got;
  REQUIRE(ref->eval(prompt, runtime::Logits::last, want).is_ok());
  REQUIRE(e->eval(prompt, runtime::Logits::last, got).is_ok());
  const uint32_t pos = e->n_past();
  // No shadow yet: refused, nothing written.
  CHECK(e->eval_layers(next, pos, shadow, runtime::Logits::all, got).message().find("needs shadow weights") !=
        std::string::npos);
  CHECK(!e->shadow_type());
  // Rows of 64 elements are no Q5_K blocks: nothing to requantise, refused.
  CHECK(e->make_shadow(GgmlType::Q5_K).message().find("no layer matrix has rows of whole q5_K blocks") !=
        std::string::npos);
  REQUIRE(e->make_shadow(GgmlType::Q4_1).is_ok());
  CHECK(e->shadow_type() == GgmlType::Q4_1);
  CHECK(e->shadow_bytes() > 0);
  REQUIRE(ref->eval_layers(next, pos, {}, runtime::Logits::all, want).is_ok());
  REQUIRE(e->eval_layers(next, pos, shadow, runtime::Logits::all, got).is_ok());
  CHECK(e->n_past() == pos);  // a shadow pass is a draft
  REQUIRE(got.size() == want.size());
  CHECK(got != want);  // other weights, other logits
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(got[i] - want[i]))), max_ref = std::max(max_ref, double(std::abs(want[i])));
  CHECK(max_diff < 0.5 * max_ref);  // but close: q4_1 copies of q8_0 weights
  // The full pass from layer 0 overwrites the shadow's KV: the reference's logits bit for bit.
  REQUIRE(e->eval_layers(next, pos, {}, runtime::Logits::all, got).is_ok());
  CHECK(got == want);
  CHECK(e->n_past() == pos + next.size());
  // Trees take no shadow range.
  const std::vector<int32_t> parents = {-1};
  CHECK(e->eval_tree(std::span(next).first(1), parents, e->n_past(), shadow, runtime::Logits::all, got)
            .message()
            .find("no shadow range") != std::string::npos);
  // A type strata cannot quantise to.
  CHECK(e->make_shadow(GgmlType::I8).message().find("cannot quantise to") != std::string::npos);
}

TEST_CASE("greedy speculative decoding equals plain greedy decoding on synthetic models", "[spec]") {
  // shadow:q4_1: the models' 64-element rows are whole blocks of 32 (q2_K's 256 would keep them).
  const std::vector<std::string> modes = {"lookup", "early:d=1", "early:d=3", "subset", "subset:skip=0.5", "auto:d=2",
                                          "shadow:q4_1"};
  std::map<std::string, std::pair<uint64_t, uint64_t>> accepted_drafted;
  for (auto [seed, type] : {std::pair{11u, GgmlType::Q8_0}, std::pair{12u, GgmlType::F32}, std::pair{13u, GgmlType::Q4_0}}) {
    const std::string path = test::small_spec_model(seed, type);
    // ubatch 16: sliding layers keep a ring of 16 + 16 slots, so 40+ tokens wrap it.
    auto e = cpu_engine(path, 160, 16);
    const uint32_t n_layer = e->model().spec.hp.n_layer, n_vocab = e->model().spec.hp.n_vocab;
    Rng rng(seed);
    for (int p = 0; p < 50; ++p) {
      // Prompts with repeats, so that prompt lookup has matches to verify.
      std::vector<int32_t> prompt(1 + rng.next_u32() % 24);
      for (size_t i = 0; i < prompt.size(); ++i)
        prompt[i] = i >= 4 && rng.next_u32() % 3 == 0 ? prompt[i - 4] : int32_t(rng.next_u32() % n_vocab);
      const uint32_t n = p % 10 == 0 ? 120 : 12 + rng.next_u32() % 16;
      const uint32_t draft_max = 1 + uint32_t(p) % 15;
      INFO("seed " << seed << " prompt " << p << " (" << prompt.size() << " tokens), " << n << " tokens, draft-max "
                   << draft_max);
      const auto want = test::generate(*e, prompt, n, config("none", draft_max, n_layer), test::greedy_params());
      for (const auto& m : modes) {
        INFO(m);
        spec::SpecStats st;
        const auto got = test::generate(*e, prompt, n, config(m, draft_max, n_layer), test::greedy_params(), &st);
        REQUIRE(got == want);
        for (const auto& d : st.drafters) {
          accepted_drafted[m + " " + d.name].first += d.accepted;
          accepted_drafted[m + " " + d.name].second += d.drafted;
        }
      }
    }
  }
  // Both outcomes of verification were exercised for every drafter.
  for (const auto& [name, ad] : accepted_drafted) {
    INFO(name << ": " << ad.first << " of " << ad.second << " accepted");
    CHECK(ad.first > 0);
    CHECK(ad.first < ad.second);
  }
}

TEST_CASE("greedy speculative decoding equals plain greedy decoding on strata-tiny", "[spec]") {
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf";
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  auto tok = tokenizer::Tokenizer::from_gguf((*model)->file);
  REQUIRE(tok.is_ok());
  auto e = cpu_engine(path, 256, 32);
  const uint32_t n_layer = e->model().spec.hp.n_layer;
  for (const char* text : {"The kernel uses a linked list to keep track of",
                           "A file system stores files in directories. A directory is a file that lists other files. "
                           "Summary:"}) {
    const auto prompt = tok->encode(text, true, false);
    const auto want = test::generate(*e, prompt, 32, config("none", 8, n_layer), test::greedy_params());
    for (const char* m : {"lookup", "early:d=4", "subset", "shadow", "auto"}) {
      INFO(text << " | " << m);
      spec::SpecStats st;
      CHECK(test::generate(*e, prompt, 32, config(m, 8, n_layer), test::greedy_params(), &st) == want);
    }
  }
}

TEST_CASE("drafts are capped by the engine's ubatch (the ring margin) and the context", "[spec]") {
  const std::string path = test::small_spec_model(7, GgmlType::Q8_0);
  auto e = cpu_engine(path, 48, 4);  // ubatch 4: at most 3 drafts; 48 positions: the last rounds hit the end
  const uint32_t n_layer = e->model().spec.hp.n_layer;
  const std::vector<int32_t> prompt = {1, 5, 6, 7, 5, 6, 7, 5, 6};
  const uint32_t n = 48 - uint32_t(prompt.size()) + 1;  // fills the context exactly
  const auto want = test::generate(*e, prompt, n, config("none", 15, n_layer), test::greedy_params());
  for (const char* m : {"lookup", "early:d=2", "subset", "auto:d=1"}) {
    INFO(m);
    spec::SpecStats st;
    CHECK(test::generate(*e, prompt, n, config(m, 15, n_layer), test::greedy_params(), &st) == want);
    CHECK(st.verify_rows <= 4 * st.verify_passes);
  }
}
