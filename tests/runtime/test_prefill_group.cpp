// Layer-major group prefill (ForwardOptions::prefill_group_tokens, forward_pass.h forward_group)
// against chunk-major prefill on the CPU engine: the same kernels on the same chunks in another
// order, so the logits must be identical bit for bit, for every KV type, for prompts that are not
// a multiple of the chunk (or the group), for sliding-window rings that wrap within the prompt,
// and for the decode steps after it (the KV the group wrote is the KV chunk-major writes).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kv/kv_quant.h"
#include "runtime/cpu_forward.h"
#include "logits_compare.h"
#include "test_util.h"

using namespace strata;

namespace {

struct Run {
  std::vector<float> prefill;               // the last token's logits after each prompt part
  std::vector<std::vector<float>> decode;   // then each decode step's
  uint32_t n_past = 0;
};

// The prompt in two evals (parts [0, split) with no logits and [split, n)), then `steps` decode
// steps of the prompt's first tokens.
Run run(const std::shared_ptr<const runtime::Model>& model, const std::vector<int32_t>& prompt, size_t split,
        uint32_t ubatch, uint32_t group_tokens, GgmlType kv, uint32_t steps) {
  runtime::ForwardOptions o{.n_ctx = 1024, .ubatch = ubatch, .k_type = kv, .v_type = kv, .placement = {}, .trace = {}};
  o.prefill_group_tokens = group_tokens;
  auto e = runtime::CpuForward::create(model, o);
  REQUIRE(e.is_ok());
  Run r;
  std::vector<float> logits;
  std::span<const int32_t> p(prompt);
  REQUIRE((*e)->eval(p.first(split), runtime::Logits::none, logits).is_ok());
  REQUIRE((*e)->n_past() == split);
  REQUIRE((*e)->eval(p.subspan(split), runtime::Logits::last, r.prefill).is_ok());
  for (uint32_t i = 0; i < steps; ++i) {
    REQUIRE((*e)->eval(p.subspan(i, 1), runtime::Logits::last, logits).is_ok());
    r.decode.push_back(logits);
  }
  r.n_past = (*e)->n_past();
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Checks grouped == chunk-major for each KV type and group size.
void check_model(const std::string& path, const std::vector<int32_t>& prompt, size_t split, uint32_t ubatch,
                 std::initializer_list<uint32_t> groups) {
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  const auto& spec = (*model)->spec;
  // A sliding ring (window + ubatch slots) must wrap inside the prompt, and neither part may be a
  // whole number of chunks.
  bool wraps = false;
  for (uint32_t il = 0; il < spec.hp.n_layer; ++il)
    wraps = wraps || (spec.window(il) > 0 && prompt.size() - split > spec.window(il) + ubatch);
  CHECK(wraps);
  REQUIRE(split % ubatch != 0);
  REQUIRE((prompt.size() - split) % ubatch != 0);
  for (GgmlType kv : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    INFO("KV " << kv::kv_type_name(kv));
    const Run chunked = run(model.value(), prompt, split, ubatch, 0, kv, 4);
    for (uint32_t g : groups) {
      INFO("group of " << g << " tokens, ubatch " << ubatch);
      const Run grouped = run(model.value(), prompt, split, ubatch, g, kv, 4);
      CHECK(grouped.n_past == chunked.n_past);
      CHECK(same_bits(grouped.prefill, chunked.prefill));
      REQUIRE(grouped.decode.size() == chunked.decode.size());
      for (size_t i = 0; i < grouped.decode.size(); ++i) CHECK(same_bits(grouped.decode[i], chunked.decode[i]));
    }
  }
}

}  // namespace

TEST_CASE("Layer-major group prefill equals chunk-major bit for bit on the embedded model", "[runtime][prefill]") {
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf";
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  const uint32_t n_vocab = (*model)->spec.hp.n_vocab;
  // Token ids spread over the vocabulary; the length wraps the window ring well inside the prompt.
  uint32_t window = 0;
  for (uint32_t il = 0; il < (*model)->spec.hp.n_layer; ++il) window = std::max(window, (*model)->spec.window(il));
  std::vector<int32_t> prompt(window + 3 * 48 + 29);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % n_vocab);
  // Chunks of 24 (the second part is not a multiple of it); groups of 2 and 3 chunks, and one that
  // is not a multiple of the chunk (rounded down to 3 chunks).
  check_model(path, prompt, 37, 24, {48, 72, 80});
}

TEST_CASE("Layer-major group prefill equals chunk-major bit for bit on the testdata models", "[runtime][prefill]") {
  for (const char* dir : {"gemma3-swa-q4k", "qwen3"}) {
    INFO(dir);
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    const auto tokens = test::read_tokens(base + "tokens.txt");
    REQUIRE(tokens.size() >= 64);
    // gemma3-swa-q4k: window 16; chunks of 17 (tiled attention, kernels/cpu/attention_tiled.h) and
    // of 5 (query by query), so the ring (33 or 21 slots) wraps within the prompt. qwen3 has no
    // sliding layers: the same order on full-attention KV.
    if (std::string(dir) == "gemma3-swa-q4k") {
      check_model(base + "model.gguf", tokens, 7, 17, {34, 51});
      check_model(base + "model.gguf", tokens, 7, 5, {10, 35});
    } else {
      auto model = runtime::Model::load(base + "model.gguf");
      REQUIRE(model.is_ok());
      for (GgmlType kv : {GgmlType::F16, GgmlType::Q4_1}) {
        const Run chunked = run(model.value(), tokens, 7, 5, 0, kv, 2);
        const Run grouped = run(model.value(), tokens, 7, 5, 15, kv, 2);
        CHECK(same_bits(grouped.prefill, chunked.prefill));
        for (size_t i = 0; i < grouped.decode.size(); ++i) CHECK(same_bits(grouped.decode[i], chunked.decode[i]));
      }
    }
  }
}

TEST_CASE("prefill_group picks layer-major only for multi-chunk prompts without all logits", "[runtime][prefill]") {
  runtime::ForwardOptions o;
  o.ubatch = 512;
  o.prefill_group_tokens = 4096;
  CHECK(runtime::prefill_group(o, 4000, runtime::Logits::last) == 4096);
  CHECK(runtime::prefill_group(o, 513, runtime::Logits::none) == 4096);
  CHECK(runtime::prefill_group(o, 512, runtime::Logits::last) == 0);  // one chunk: nothing to share
  CHECK(runtime::prefill_group(o, 4000, runtime::Logits::all) == 0);
  o.prefill_group_tokens = 1500;  // rounded down to whole chunks
  CHECK(runtime::prefill_group(o, 4000, runtime::Logits::last) == 1024);
  o.prefill_group_tokens = 1000;  // less than two chunks: chunk-major
  CHECK(runtime::prefill_group(o, 4000, runtime::Logits::last) == 0);
}
