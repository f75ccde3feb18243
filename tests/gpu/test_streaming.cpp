// The executor's streamed tiers (offload/weight_store.h via CudaForward's placement) against the
// resident engine: the same kernels on the same bytes, so logits must be bit-identical whatever
// is streamed, however small the ring, across prefill chunks (schedules with and without the head)
// and decode steps (the schedule repeating with prefetch across steps). Budgets are hard limits.
// Skips without a GPU.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "kernels/cuda/device_info.h"
#include "offload/weight_store.h"
#include "runtime/cuda_forward.h"
#include "engine_runs.h"
#include "logits_compare.h"
#include "test_util.h"
#include "trace_spans.h"

using namespace strata;

namespace {

using offload::Tier;

// A placement and the staging ring it runs with.
struct Streamed {
  offload::Placement placement;
  uint32_t slots = 3;
  bool shared = false;  // two slots in one two-ended buffer (offload/shared_ring.h)
  void apply(runtime::ForwardOptions& o) const {
    o.placement = placement;
    o.ring_slots = slots;
    o.shared_ring = shared;
  }
};

Streamed two_ended(Streamed r) {
  r.slots = 2;
  r.shared = true;
  return r;
}

Streamed pattern(uint32_t n_layer, int every, bool attn, bool ffn, bool head, uint32_t slots) {
  Streamed r;
  for (uint32_t il = 0; il < n_layer; ++il) {
    const bool pick = int(il) % every == 0;
    r.placement.attention.push_back(attn && pick ? Tier::stream : Tier::gpu);
    r.placement.ffn.push_back(ffn && pick ? Tier::stream : Tier::gpu);
  }
  r.placement.head = head ? Tier::stream : Tier::gpu;
  r.slots = slots;
  return r;
}

// Moves every `every`-th streamed block (attention and FFN of a layer counted apart, then the head)
// to the disk tier.
Streamed on_disk(Streamed r, int every) {
  int k = 0;
  auto& pl = r.placement;
  for (size_t il = 0; il < pl.attention.size(); ++il) {
    if (pl.attention[il] == Tier::stream && k++ % every == 0) pl.attention[il] = Tier::disk;
    if (pl.ffn[il] == Tier::stream && k++ % every == 0) pl.ffn[il] = Tier::disk;
  }
  if (pl.head == Tier::stream && k % every == 0) pl.head = Tier::disk;
  return r;
}

}  // namespace

TEST_CASE("Streamed weights give bit-identical logits to resident ones", "[gpu][streaming]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  for (const char* dir : {"gemma3-swa-q4k", "llama", "qwen3"}) {
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    auto tokens = test::read_tokens(base + "tokens.txt");
    REQUIRE(tokens.size() >= 24);
    const size_t n_prompt = tokens.size() - 8;
    auto model = runtime::Model::load(base + "model.gguf");
    REQUIRE(model.is_ok());
    const uint32_t n_layer = (*model)->spec.hp.n_layer;
    // The GPU weight layout on (ForwardOptions::gpu_layout): pinned blocks are repacked like resident ones.
    const runtime::ForwardOptions base_opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16,
                                           .placement = {}, .gpu_layout = true, .trace = {}};
    auto resident = runtime::CudaForward::create(model.value(), base_opt);
    REQUIRE(resident.is_ok());
    const auto want_gpu_layout = test::run_prompt_then_decode(**resident, tokens, n_prompt);
    // Disk-tier plans keep the GGUF layout (ForwardOptions::gpu_layout): their reference is the
    // resident engine in that layout; every other plan is compared with the repacked resident run.
    auto gguf_opt = base_opt;
    gguf_opt.gpu_layout = false;
    auto resident_gguf = runtime::CudaForward::create(model.value(), gguf_opt);
    REQUIRE(resident_gguf.is_ok());
    const auto want_gguf = test::run_prompt_then_decode(**resident_gguf, tokens, n_prompt);

    struct Case { const char* name; Streamed r; };
    const Case cases[] = {
        {"everything streamed, 2 slots", pattern(n_layer, 1, true, true, true, 2)},
        {"everything streamed, 5 slots", pattern(n_layer, 1, true, true, true, 5)},
        {"every other layer's FFN, 3 slots", pattern(n_layer, 2, false, true, false, 3)},
        {"attention only, head resident, 2 slots", pattern(n_layer, 1, true, false, false, 2)},
        {"head only", pattern(n_layer, 1, false, false, true, 2)},
        {"everything streamed, every other block from disk, 3 slots", on_disk(pattern(n_layer, 1, true, true, true, 3), 2)},
        {"everything from disk, 2 slots", on_disk(pattern(n_layer, 1, true, true, true, 2), 1)},
        // Two-ended ring: attention and FFN blocks alternate (slot 1 top-aligned under each size);
        // with every other FFN the order has attention pairs too, and a prefill chunk without the
        // head wraps from the last block to the first, a pair the buffer need not hold (serialised).
        {"everything streamed, two-ended", two_ended(pattern(n_layer, 1, true, true, true, 2))},
        {"attention streamed, every other layer's FFN too, two-ended", [&] {
           Streamed r = two_ended(pattern(n_layer, 1, true, false, false, 2));
           for (uint32_t il = 0; il < n_layer; il += 2) r.placement.ffn[il] = Tier::stream;
           return r;
         }()},
    };
    for (const auto& c : cases) {
      INFO(dir << ": " << c.name);
      auto opt = base_opt;
      c.r.apply(opt);
      const auto& want = c.r.placement.any(Tier::disk) ? want_gguf : want_gpu_layout;
      auto streamed = runtime::CudaForward::create(model.value(), opt);
      INFO((streamed.is_ok() ? std::string() : streamed.message()));
      REQUIRE(streamed.is_ok());
      const auto got = test::run_prompt_then_decode(**streamed, tokens, n_prompt);
      REQUIRE(got.size() == want.size());
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
      CHECK(differ == 0);
      // A second sequence on the same engine (truncate to 0): the ring state carries over.
      (*streamed)->truncate(0);
      const auto again = test::run_prompt_then_decode(**streamed, tokens, n_prompt);
      CHECK(std::memcmp(again.data(), want.data(), want.size() * sizeof(float)) == 0);
      // The two-ended cases take one buffer smaller than two slots of the largest block.
      if (c.r.shared) CHECK((*streamed)->shared_ring());
    }
  }
}

TEST_CASE("VRAM and pinned budgets are hard limits with clear errors", "[gpu][streaming]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  auto model = runtime::Model::load(test::testdata("models/llama/model.gguf"));
  REQUIRE(model.is_ok());
  runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
  auto resident = runtime::CudaForward::create(model.value(), opt);
  REQUIRE(resident.is_ok());
  const uint64_t need = (*resident)->vram_peak_bytes();

  SECTION("the exact peak fits, one granule less does not") {
    opt.vram_budget = need;
    auto ok = runtime::CudaForward::create(model.value(), opt);
    INFO((ok.is_ok() ? std::string() : ok.message()));
    CHECK(ok.is_ok());
    opt.vram_budget = need - 256;
    auto bad = runtime::CudaForward::create(model.value(), opt);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("VRAM budget") && Catch::Contains("exceeded"));
  }
  SECTION("streaming everything needs less, and the peak stays under the budget") {
    pattern((*model)->spec.hp.n_layer, 1, true, true, true, 2).apply(opt);
    opt.vram_budget = need;
    auto s = runtime::CudaForward::create(model.value(), opt);
    REQUIRE(s.is_ok());
    CHECK((*s)->vram_peak_bytes() <= need);
  }
  SECTION("pinned budget") {
    pattern((*model)->spec.hp.n_layer, 1, true, true, true, 2).apply(opt);
    opt.pinned_budget = 4096;
    auto bad = runtime::CudaForward::create(model.value(), opt);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("pinned-RAM budget"));
  }
  SECTION("a refused pinned allocation names the block and the cause, and frees what was pinned") {
    pattern((*model)->spec.hp.n_layer, 1, true, true, true, 2).apply(opt);
    offload::inject_pinned_alloc_failure(2);  // the second block's pinning fails
    auto bad = runtime::CudaForward::create(model.value(), opt);
    offload::inject_pinned_alloc_failure(0);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("cannot pin") && Catch::Contains("of host RAM for block") &&
                                  Catch::Contains("refused (failure injected"));
    auto again = runtime::CudaForward::create(model.value(), opt);  // the hook fired once
    INFO((again.is_ok() ? std::string() : again.message()));
    CHECK(again.is_ok());
  }
  SECTION("a ring of one slot is refused") {
    pattern((*model)->spec.hp.n_layer, 1, true, false, false, 1).apply(opt);
    auto bad = runtime::CudaForward::create(model.value(), opt);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("at least 2 slots"));
  }
}

TEST_CASE("A trace shows each streamed block copied before its compute, and changes nothing", "[gpu][streaming][trace]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const std::string base = test::testdata("models/llama/");
  auto tokens = test::read_tokens(base + "tokens.txt");
  const size_t n_prompt = tokens.size() - 8;
  auto model = runtime::Model::load(base + "model.gguf");
  REQUIRE(model.is_ok());
  const uint32_t n_layer = (*model)->spec.hp.n_layer;
  runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
  pattern(n_layer, 1, true, true, true, 3).apply(opt);
  auto plain = runtime::CudaForward::create(model.value(), opt);
  REQUIRE(plain.is_ok());
  const auto want = test::run_prompt_then_decode(**plain, tokens, n_prompt);

  opt.trace = std::make_shared<Trace>();
  auto traced = runtime::CudaForward::create(model.value(), opt);
  REQUIRE(traced.is_ok());
  const auto got = test::run_prompt_then_decode(**traced, tokens, n_prompt);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);

  // Per block label, its copies and its computes in order: the k-th compute uses the k-th copy.
  std::map<std::string, std::vector<test::TraceSpan>> copies, computes;
  size_t steps = 0;
  for (const auto& s : test::trace_spans(*opt.trace)) {
    if (s.track == "h2d copy") copies[s.name].push_back(s);
    if (s.track == "gpu compute") computes[s.name].push_back(s);
    if (s.track == "host" && s.name == "decode step") ++steps;
  }
  CHECK(steps >= 8);  // the 8 decode evals (a 1-token prefill chunk would count too)
  REQUIRE(computes.size() == 2 * n_layer + 1);  // every attention and FFN block, and the head
  for (const auto& [label, cs] : computes) {
    INFO(label);
    const auto& cp = copies[label];
    // Copies prefetched for a step that never came may remain, never fewer than the uses.
    REQUIRE(cp.size() >= cs.size());
    for (size_t k = 0; k < cs.size(); ++k) {
      CHECK(cs[k].dur > 0);
      CHECK(cp[k].dur > 0);
      CHECK(cp[k].end() <= cs[k].ts + 1.0);  // 1 us: event timestamp resolution
    }
  }
}

TEST_CASE("The disk tier fails cleanly when the model file changes under it", "[gpu][streaming][disk]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const auto copy = test::temp_dir("disk-tier") / "model.gguf";
  std::filesystem::copy_file(test::testdata("models/llama/model.gguf"), copy);
  auto model = runtime::Model::load(copy.string());
  REQUIRE(model.is_ok());
  runtime::ForwardOptions opt{.n_ctx = 64, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
  on_disk(pattern((*model)->spec.hp.n_layer, 1, true, true, false, 2), 1).apply(opt);
  auto e = runtime::CudaForward::create(model.value(), opt);
  INFO((e.is_ok() ? std::string() : e.message()));
  REQUIRE(e.is_ok());
  std::vector<float> logits;
  const std::vector<int32_t> toks{1, 2, 3};
  REQUIRE((*e)->eval(toks, runtime::Logits::last, logits).is_ok());
  // Another process rewriting the model (seen as a new mtime) is caught at the next read. (Not a
  // truncation: the embedding rows still come from the mapping, where that would be SIGBUS.)
  std::filesystem::last_write_time(copy, std::filesystem::last_write_time(copy) + std::chrono::hours(1));
  Status s = (*e)->eval(toks, runtime::Logits::last, logits);
  REQUIRE_FALSE(s.is_ok());
  CHECK_THAT(s.message(), Catch::Contains("model.gguf") && Catch::Contains("disk tier"));
  CHECK((*e)->n_past() == 3);  // the failed eval appended nothing
}
