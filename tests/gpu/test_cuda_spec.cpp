// Greedy speculative decoding on the CUDA engine gives exactly the CUDA engine's plain greedy
// text, for every drafter (layer subset included: its skip mask also drops the skipped layers'
// blocks from the streaming schedule), resident, with streamed weight blocks and with the host
// tiers. This relies on
// CudaForward::eval_layers computing each verify row as a decode step does (multi-column GEMV
// with the same per-column reduction as one column; attention one query at a time). Skips
// without a GPU.
#include <catch2/catch.hpp>

#include "cli_run.h"
#include "placements.h"
#include "kernels/cuda/device_info.h"
#include "runtime/cuda_forward.h"
#include "spec/spec_test_util.h"
#include "tokenizer/tokenizer.h"

using namespace strata;

namespace {

spec::SpecConfig config(const std::string& text, uint32_t n_layer) {
  auto c = spec::parse_spec(text, 8, n_layer);
  REQUIRE(c.is_ok());
  return *c;
}

using test::stream_odd_layers;

// The host-side tiers: FFN of even layers on the CPU, KV of every full-attention layer in host
// RAM. Verification rows must match decode steps there too (CPU matmuls by the dot kernels,
// host attention one query at a time).
offload::Placement host_tiers(const model::ModelSpec& s) {
  offload::Placement r;
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    r.attention.push_back(offload::Tier::gpu);
    r.ffn.push_back(il % 2 == 0 ? offload::Tier::cpu : offload::Tier::gpu);
    r.kv.push_back(s.window(il) == 0 ? offload::KvTier::host : offload::KvTier::gpu);
  }
  return r;
}

}  // namespace

TEST_CASE("GPU greedy speculative decoding equals GPU plain greedy decoding", "[gpu][spec]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  for (auto type : {GgmlType::Q8_0, GgmlType::F32}) {
    const std::string path = test::small_spec_model(31, type);
    auto model = runtime::Model::load(path);
    REQUIRE(model.is_ok());
    const uint32_t n_layer = (*model)->spec.hp.n_layer, n_vocab = (*model)->spec.hp.n_vocab;
    for (const char* where : {"resident", "streamed", "host tiers"}) {
      const std::string w = where;
      runtime::ForwardOptions opt{.n_ctx = 160, .ubatch = 16, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}};
      if (w == "streamed") opt.placement = stream_odd_layers(n_layer);
      if (w == "host tiers") opt.placement = host_tiers((*model)->spec);
      auto gpu = runtime::CudaForward::create(*model, opt);
      INFO((gpu.is_ok() ? std::string() : gpu.message()));
      REQUIRE(gpu.is_ok());
      Rng rng(uint64_t(type) * 7 + (w == "streamed") + 2 * (w == "host tiers"));
      for (int p = 0; p < 50; ++p) {
        std::vector<int32_t> prompt(1 + rng.next_u32() % 24);
        for (size_t i = 0; i < prompt.size(); ++i)
          prompt[i] = i >= 4 && rng.next_u32() % 3 == 0 ? prompt[i - 4] : int32_t(rng.next_u32() % n_vocab);
        const uint32_t n = p % 10 == 0 ? 120 : 24;  // 120: the sliding rings (16 + 16 slots) wrap
        INFO(ggml_type_info(type).name << " " << w << " prompt " << p);
        const auto want = test::generate(**gpu, prompt, n, config("none", n_layer), test::greedy_params());
        for (const char* m : {"lookup", "early:d=1", "early:d=2", "subset", "subset:skip=0.5", "auto:d=2"}) {
          INFO(m);
          CHECK(test::generate(**gpu, prompt, n, config(m, n_layer), test::greedy_params()) == want);
        }
      }
    }
  }
}

TEST_CASE("GPU greedy speculative decoding on strata-tiny gives the plain text", "[gpu][spec]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf";
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  auto tok = tokenizer::Tokenizer::from_gguf((*model)->file);
  REQUIRE(tok.is_ok());
  auto gpu = runtime::CudaForward::create(*model, {.n_ctx = 1024, .ubatch = 64, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}});
  REQUIRE(gpu.is_ok());
  const uint32_t n_layer = (*model)->spec.hp.n_layer;
  const auto prompt = tok->encode(
      "A file system stores files in directories. A directory is a file that lists other files, and the root "
      "directory is the top of the tree.\n\nSummary:", true, false);
  // 400 tokens: past the 256-token window, so the rings wrap during speculation.
  const auto want = test::generate(**gpu, prompt, 400, config("none", n_layer), test::greedy_params());
  for (const char* m : {"lookup", "early:d=4", "early:d=8", "subset", "auto"}) {
    INFO(m);
    spec::SpecStats st;
    CHECK(test::generate(**gpu, prompt, 400, config(m, n_layer), test::greedy_params(), &st) == want);
    WARN(m << ": " << st.summary());
  }
}

// `generate` without --spec (session/default_spec.h): on the GPU a verify pass of a few rows costs
// about one step, so the plan predicts that free drafts pay and the run takes --spec auto, with the
// plain greedy text.
TEST_CASE("strata generate on the GPU without --spec runs auto, and the text is the plain one", "[gpu][spec][cli]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const std::string model = std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf";
  const std::string cmd = "generate -m " + model + " --device cuda -q -p 'A list holds items. A list of lists holds "
                          "lists.\n\nSummary:' -n 96 --temp 0 --ignore-eos";
  const auto d = test::run_strata(cmd);
  INFO(d.err);
  REQUIRE(d.code == 0);
  CHECK(test::has(d.err, "| spec auto"));
  CHECK(test::has(d.err, "spec: auto (the default: a verify pass of 2 rows is predicted at"));
  CHECK(test::has(d.err, "verify passes"));  // auto's statistics
  const auto none = test::run_strata(cmd + " --spec none");
  REQUIRE(none.code == 0);
  CHECK(test::has(none.err, "| spec none"));
  CHECK(none.out == d.out);
}

TEST_CASE("GPU eval_layers with a skip mask equals the composition of two layer ranges", "[gpu][spec]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const std::string path = test::small_spec_model(33, GgmlType::Q8_0);
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  const uint32_t n_layer = (*model)->spec.hp.n_layer, n_embd = (*model)->spec.hp.n_embd;
  for (bool streamed : {false, true}) {
    INFO((streamed ? "streamed" : "resident"));
    runtime::ForwardOptions opt{.n_ctx = 64, .ubatch = 16, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}};
    if (streamed) opt.placement = stream_odd_layers(n_layer);
    auto ref = runtime::CudaForward::create(*model, opt);
    auto masked = runtime::CudaForward::create(*model, opt);
    REQUIRE(ref.is_ok());
    REQUIRE(masked.is_ok());
    const std::vector<int32_t> prompt = {1, 17, 40, 200, 9, 33, 12};
    const std::vector<int32_t> next = {33, 34, 35, 36, 37, 38};
    std::vector<float> want, got, none;
    REQUIRE((*ref)->eval(prompt, runtime::Logits::last, want).is_ok());
    REQUIRE((*masked)->eval(prompt, runtime::Logits::last, got).is_ok());
    const uint32_t pos = (*ref)->n_past();
    for (uint32_t j = 1; j + 1 < n_layer; ++j) {
      INFO("skipping layer " << j);
      std::vector<float> hidden(next.size() * n_embd);
      REQUIRE((*ref)->eval_layers(next, pos, {.first = 0, .end = j, .hidden_in = nullptr, .hidden_out = hidden.data(), .skip = {}},
                                  runtime::Logits::none, none).is_ok());
      REQUIRE((*ref)->eval_layers(next, pos, {.first = j + 1, .end = 0, .hidden_in = hidden.data(), .hidden_out = nullptr, .skip = {}},
                                  runtime::Logits::all, want).is_ok());
      (*ref)->truncate(pos);
      std::vector<uint8_t> skip(n_layer, 0);
      skip[j] = 1;
      REQUIRE((*masked)->eval_layers(next, pos, {.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = skip},
                                     runtime::Logits::all, got).is_ok());
      CHECK(got == want);
      CHECK((*masked)->n_past() == pos);
    }
  }
}

// Token trees (M12) on the CUDA engine: with f16 KV (flash-decoding attention) `early:d=N,tree=B`
// drafts and verifies trees (test_cuda_tree.cpp checks the engine calls), and the text stays plain
// greedy's, resident, streamed and with cpu-tier blocks. An f32-KV engine refuses eval_tree with a clear error and the
// decoder verifies chains there, with the same text.
TEST_CASE("GPU: token trees on the CUDA engine give the plain greedy text", "[gpu][spec][tree]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  auto model = runtime::Model::load(test::small_spec_model(32, GgmlType::Q8_0));
  REQUIRE(model.is_ok());
  const uint32_t n_layer = (*model)->spec.hp.n_layer;
  const std::vector<int32_t> prompt = {2, 17, 40, 99, 123, 7};
  // A cpu-tier engine computes its host rows one by one (int8 CPU kernels), trees' rows too.
  for (const char* where : {"resident", "streamed", "cpu-tier FFN blocks"}) {
    INFO(where);
    runtime::ForwardOptions opt{.n_ctx = 160, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
    if (where[0] == 's') opt.placement = stream_odd_layers(n_layer);
    if (where[0] == 'c') opt.placement = test::cpu_ffn_odd_layers(n_layer), opt.cpu_int8 = true;
    auto gpu = runtime::CudaForward::create(*model, opt);
    INFO((gpu.is_ok() ? std::string() : gpu.message()));
    REQUIRE(gpu.is_ok());
    runtime::Engine& e = **gpu;
    CHECK(e.supports_trees());
    // 120 tokens: the sliding rings (16 + 16 slots) wrap under the trees.
    const auto want = test::generate(e, prompt, 120, config("none", n_layer), test::greedy_params());
    for (const char* m : {"early:d=2,tree=2", "early:d=1,tree=3"}) {
      INFO(m);
      spec::SpecStats st;
      CHECK(test::generate(e, prompt, 120, config(m, n_layer), test::greedy_params(), &st) == want);
      CHECK(st.drafters.at(0).rounds > 0);
      CHECK(st.drafters.at(0).tree_rounds > 0);
    }
  }

  runtime::ForwardOptions opt{.n_ctx = 160, .ubatch = 16, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}};
  auto gpu = runtime::CudaForward::create(*model, opt);
  REQUIRE(gpu.is_ok());
  runtime::Engine& e = **gpu;
  CHECK_FALSE(e.supports_trees());
  std::vector<float> l;
  REQUIRE(e.eval(std::vector<int32_t>{2, 17, 40}, runtime::Logits::last, l).is_ok());
  const std::vector<int32_t> tokens = {5, 6}, parents = {-1, 0};
  Status s = e.eval_tree(tokens, parents, 3, {}, runtime::Logits::all, l);
  CHECK_FALSE(s.is_ok());
  CHECK_THAT(s.message(), Catch::Contains("tree") && Catch::Contains("KV"));
  CHECK_FALSE(e.keep_tree_path(3, std::vector<uint32_t>{0}).is_ok());
  CHECK(e.n_past() == 3);
  const auto want = test::generate(e, prompt, 60, config("none", n_layer), test::greedy_params());
  spec::SpecStats st;
  CHECK(test::generate(e, prompt, 60, config("early:d=2,tree=2", n_layer), test::greedy_params(), &st) == want);
  CHECK(st.drafters.at(0).rounds > 0);
  CHECK(st.drafters.at(0).tree_rounds == 0);
}

TEST_CASE("GPU engine: --spec shadow is refused with one line, a shadow layer range too", "[gpu][spec]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const std::string path = test::small_spec_model(34, GgmlType::Q8_0);
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  auto gpu = runtime::CudaForward::create(*model, {.n_ctx = 64, .ubatch = 16, .k_type = GgmlType::F16,
                                                   .v_type = GgmlType::F16, .placement = {}, .trace = {}});
  REQUIRE(gpu.is_ok());
  runtime::Engine& e = **gpu;
  runtime::Sampler sampler(test::greedy_params(), e.model().spec.hp.n_vocab);
  auto cfg = spec::parse_spec("shadow", 4, e.model().spec.hp.n_layer);
  REQUIRE(cfg.is_ok());
  auto dec = spec::SpeculativeDecoder::create(e, sampler, *cfg);
  REQUIRE(!dec.is_ok());
  CHECK(dec.message().find("--spec shadow:q2_K: the cuda engine keeps no shadow weights") != std::string::npos);
  std::vector<float> logits;
  REQUIRE(e.eval(std::vector<int32_t>{1, 2, 3}, runtime::Logits::last, logits).is_ok());
  const runtime::LayerRange shadow{.first = 0, .end = 0, .hidden_in = nullptr, .hidden_out = nullptr, .skip = {}, .window = {}, .shadow = true};
  CHECK(e.eval_layers(std::vector<int32_t>{4}, e.n_past(), shadow, runtime::Logits::last, logits)
            .message()
            .find("needs shadow weights") != std::string::npos);
  CHECK(e.n_past() == 3);
}
