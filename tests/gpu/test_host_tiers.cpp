// The executor's host-side tiers against the resident GPU run: cpu-tier weight blocks (matmuls on
// the CPU over the model's host mapping) and host-tier KV (K/V in host RAM, attention on the CPU),
// alone and mixed with streamed and disk blocks.
//
// Why a tolerance and not bit-equality (as tests/gpu/test_streaming.cpp has for streamed blocks):
// a cpu block's matmuls run on the CPU kernels (f32 activations and another summation order; the
// GPU's quantised GEMV rounds activations to int8 per 32) and host-KV attention sums in another
// order, so logits differ by rounding: the bounds below are test_cuda_forward.cpp's GPU-vs-CPU
// bounds. What must not differ is the text: greedy tokens are compared exactly, up to the first
// step whose top-1/top-2 gap in the resident run is inside the tolerance (a near tie rounding may
// flip; none is expected on these models). A wrong host view, KV slot or staging offset moves
// logits by O(1). Runs of the same placement are compared bit for bit (rollback, trace).
// Skips without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "kernels/cuda/device_info.h"
#include "kv/kv_quant.h"
#include "runtime/cuda_forward.h"
#include "runtime/forward_pass.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"
#include "engine_runs.h"
#include "logits_compare.h"
#include "test_util.h"
#include "trace_spans.h"

using namespace strata;

namespace {

// Every `every`-th layer (from `first`) has its attention / FFN block on the cpu tier.
using offload::KvTier;
using offload::Tier;

offload::Placement cpu_blocks(uint32_t n_layer, uint32_t first, uint32_t every, bool attn, bool ffn, bool head) {
  offload::Placement r;
  for (uint32_t il = 0; il < n_layer; ++il) {
    const bool pick = il >= first && (il - first) % every == 0;
    r.attention.push_back(attn && pick ? Tier::cpu : Tier::gpu);
    r.ffn.push_back(ffn && pick ? Tier::cpu : Tier::gpu);
  }
  r.head = head ? Tier::cpu : Tier::gpu;
  return r;
}

// Host KV in every full-attention layer (sliding layers keep their rings in VRAM).
offload::Placement& host_kv(offload::Placement& r, const model::ModelSpec& s) {
  r.kv.clear();
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) r.kv.push_back(s.window(il) == 0 ? KvTier::host : KvTier::gpu);
  return r;
}

// Layers 0, 3, 6..: attention streamed from pinned RAM, FFN from disk; 1, 4, ..: both on the CPU;
// 2, 5, ..: resident; host KV in every full layer; the head streamed. (Run with 2 ring slots.)
offload::Placement mixed(const model::ModelSpec& s) {
  offload::Placement r;
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    r.attention.push_back(il % 3 == 0 ? Tier::stream : il % 3 == 1 ? Tier::cpu : Tier::gpu);
    r.ffn.push_back(il % 3 == 0 ? Tier::disk : il % 3 == 1 ? Tier::cpu : Tier::gpu);
  }
  r.head = Tier::stream;
  return host_kv(r, s);
}

bool quantised_weights(const std::string& dir) { return dir.find("q4k") != std::string::npos; }

}  // namespace

TEST_CASE("cpu-tier blocks and host KV give the resident run's text and close logits", "[gpu][host-tiers]") {
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
    const auto& spec = (*model)->spec;
    const uint32_t n_layer = spec.hp.n_layer, n_vocab = spec.hp.n_vocab;
    const runtime::ForwardOptions base_opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
    auto resident = runtime::CudaForward::create(model.value(), base_opt);
    REQUIRE(resident.is_ok());
    const auto want = test::run_prompt_then_decode(**resident, tokens, n_prompt);
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + n_prompt);
    const auto want_text = test::greedy_with_gaps(**resident, prompt, 24);

    auto host_kv_only = offload::Placement{};
    auto all_cpu_host_kv = cpu_blocks(n_layer, 0, 1, true, true, true);
    struct Case { std::string name; offload::Placement r; GgmlType k, v; uint32_t slots = 3; bool int8 = false; };
    std::vector<Case> cases = {
        {"every other layer's FFN on the CPU", cpu_blocks(n_layer, 1, 2, false, true, false), GgmlType::F16, GgmlType::F16},
        {"every other layer's FFN on the CPU, int8 kernels", cpu_blocks(n_layer, 1, 2, false, true, false), GgmlType::F16,
         GgmlType::F16, 3, true},
        {"every other layer's attention on the CPU", cpu_blocks(n_layer, 0, 2, true, false, false), GgmlType::F16, GgmlType::F16},
        {"the head on the CPU", cpu_blocks(n_layer, 0, 1, false, false, true), GgmlType::F16, GgmlType::F16},
        {"host KV in every full layer", host_kv(host_kv_only, spec), GgmlType::F16, GgmlType::F16},
        {"everything on the CPU, host KV", host_kv(all_cpu_host_kv, spec), GgmlType::F16, GgmlType::F16},
        {"mixed: streamed, disk, cpu, resident, host KV, 2 slots", mixed(spec), GgmlType::F16, GgmlType::F16, 2},
        {"mixed, int8 kernels", mixed(spec), GgmlType::F16, GgmlType::F16, 2, true},
    };
    // Quantised host KV (the CPU cache quantises, the CPU kernel reads the blocks); the resident
    // run keeps f16, so the bound grows by the quantisation's own effect (test_cuda_forward.cpp).
    if (kv::check_kv_type(GgmlType::Q8_0, spec.hp.n_embd_head).is_ok()) {
      auto r = offload::Placement{};
      cases.push_back({"host KV q8", host_kv(r, spec), GgmlType::Q8_0, GgmlType::Q8_0});
    }
    for (const auto& c : cases) {
      INFO(dir << ": " << c.name);
      auto opt = base_opt;
      opt.placement = c.r;
      opt.ring_slots = c.slots;
      opt.k_type = c.k;
      opt.v_type = c.v;
      opt.cpu_int8 = c.int8;
      auto e = runtime::CudaForward::create(model.value(), opt);
      INFO((e.is_ok() ? std::string() : e.message()));
      REQUIRE(e.is_ok());
      const auto got = test::run_prompt_then_decode(**e, tokens, n_prompt);
      const auto diff = test::compare_logits(got, want, n_vocab, 5e-2);
      REQUIRE(diff.same_size);
      const bool q8 = c.k == GgmlType::Q8_0;
      // Quantised weights: the GPU's int8-activation GEMV and the CPU's dot kernels each sit up
      // to ~3e-2 from the exact product (test_cuda_forward.cpp), in different directions.
      const double tol = (quantised_weights(dir) ? 6e-2 : 5e-3) + 2e-3 + (q8 ? 2e-2 : 0.0);
      INFO("worst max|diff| / max|logit| = " << diff.worst_ratio << ", KL mean " << diff.kl_mean);
      WARN(dir << ": " << c.name << ": worst ratio " << diff.worst_ratio << ", KL mean " << diff.kl_mean);
      CHECK(diff.worst_ratio < tol);
      CHECK(diff.kl_mean <= (quantised_weights(dir) ? 2e-3 : 1e-3));
      CHECK(diff.top1_mismatch == 0);
      const auto text = test::greedy_with_gaps(**e, prompt, 24);
      for (size_t i = 0; i < want_text.tokens.size(); ++i) {
        INFO("step " << i << ", resident top-1/top-2 gap " << want_text.gap[i]);
        CHECK(text.tokens[i] == want_text.tokens[i]);
        if (want_text.gap[i] < tol) break;  // a near tie: rounding may choose either
      }
    }
  }
}

// The embedded model (a real one: its logits have real gaps): the greedy text with cpu-tier blocks,
// int8 CPU kernels as `--cpu-matmul auto` runs them, equals the resident run's.
TEST_CASE("strata-tiny: cpu-tier blocks give the resident greedy text", "[gpu][host-tiers]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  auto model = runtime::Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-q4_k.gguf");
  REQUIRE(model.is_ok());
  auto tok = tokenizer::Tokenizer::from_gguf((*model)->file);
  REQUIRE(tok.is_ok());
  const auto& spec = (*model)->spec;
  const auto prompt = tok->encode("The vim editor has modes. In normal mode, keys move the cursor;", true, false);
  const runtime::ForwardOptions base{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
  auto resident = runtime::CudaForward::create(model.value(), base);
  REQUIRE(resident.is_ok());
  const auto want = test::greedy_with_gaps(**resident, prompt, 48);
  const uint32_t n_layer = spec.hp.n_layer;
  for (const auto& [name, pl] : {std::pair{"every other FFN", cpu_blocks(n_layer, 1, 2, false, true, false)},
                                 std::pair{"every block and the head", cpu_blocks(n_layer, 0, 1, true, true, true)},
                                 std::pair{"mixed with streamed, disk and host KV", mixed(spec)}}) {
    INFO(name);
    auto opt = base;
    opt.placement = pl;
    opt.ring_slots = 2;
    opt.cpu_int8 = true;
    auto e = runtime::CudaForward::create(model.value(), opt);
    INFO((e.is_ok() ? std::string() : e.message()));
    REQUIRE(e.is_ok());
    const auto got = test::greedy_with_gaps(**e, prompt, 48);
    for (size_t i = 0; i < want.tokens.size(); ++i) {
      INFO("step " << i << ", resident top-1/top-2 gap " << want.gap[i]);
      CHECK(got.tokens[i] == want.tokens[i]);
      if (want.gap[i] < 6e-2) break;  // a near tie: rounding may choose either
    }
  }
}

TEST_CASE("Host KV rolls back: truncate then new tokens equals a fresh run", "[gpu][host-tiers]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  for (const char* dir : {"gemma3-swa-q4k", "llama"}) {
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    auto tokens = test::read_tokens(base + "tokens.txt");
    REQUIRE(tokens.size() >= 24);
    auto model = runtime::Model::load(base + "model.gguf");
    REQUIRE(model.is_ok());
    const auto& spec = (*model)->spec;
    runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::Q8_0, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
    if (!kv::check_kv_type(GgmlType::Q8_0, spec.hp.n_embd_head).is_ok()) opt.k_type = GgmlType::F16;
    opt.placement = cpu_blocks(spec.hp.n_layer, 1, 2, false, true, false);
    host_kv(opt.placement, spec);
    const size_t n_prompt = tokens.size() - 8;
    // The fresh run: prompt, 2 tokens, then 6 others. The rolled-back run: prompt, 2 tokens,
    // 6 tokens that are then forgotten, then the same 6 others.
    std::vector<int32_t> fresh_tokens(tokens.begin(), tokens.begin() + n_prompt + 2);
    std::vector<int32_t> other;
    for (size_t i = 0; i < 6; ++i) other.push_back(tokens[(i * 7 + 3) % n_prompt]);
    fresh_tokens.insert(fresh_tokens.end(), other.begin(), other.end());
    auto fresh = runtime::CudaForward::create(model.value(), opt);
    REQUIRE(fresh.is_ok());
    const auto want = test::run_prompt_then_decode(**fresh, fresh_tokens, n_prompt);

    auto e = runtime::CudaForward::create(model.value(), opt);
    REQUIRE(e.is_ok());
    auto got = test::run_prompt_then_decode(**e, tokens, n_prompt);  // prompt + 8 real tokens
    (*e)->truncate(uint32_t(n_prompt + 2));
    REQUIRE((*e)->n_past() == n_prompt + 2);
    got.resize((n_prompt + 2) * spec.hp.n_vocab);
    std::vector<float> one;
    for (int32_t t : other) {
      REQUIRE((*e)->eval(std::span(&t, 1), runtime::Logits::last, one).is_ok());
      got.insert(got.end(), one.begin(), one.end());
    }
    INFO(dir);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("Host KV takes no VRAM, host tiers show as cpu compute spans in a trace", "[gpu][host-tiers][trace]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const std::string base = test::testdata("models/llama/");
  auto tokens = test::read_tokens(base + "tokens.txt");
  const size_t n_prompt = tokens.size() - 8;
  auto model = runtime::Model::load(base + "model.gguf");
  REQUIRE(model.is_ok());
  const auto& spec = (*model)->spec;
  const uint32_t n_layer = spec.hp.n_layer;
  runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
  auto resident = runtime::CudaForward::create(model.value(), opt);
  REQUIRE(resident.is_ok());

  // Host KV alone: K and V of n_ctx positions in f16 per layer leave the arena, nothing else
  // changes (cpu-tier blocks would add a staging ring, which a model this small may not repay).
  auto kv_opt = opt;
  host_kv(kv_opt.placement, spec);
  const uint32_t n_host = kv_opt.placement.n_kv_host();
  REQUIRE(n_host == n_layer);  // llama: every layer is full attention
  auto kv_only = runtime::CudaForward::create(model.value(), kv_opt);
  REQUIRE(kv_only.is_ok());
  const uint64_t kv_layer = 2 * uint64_t(opt.n_ctx) * kv::kv_row_bytes(GgmlType::F16, spec.kv_width());
  CHECK((*resident)->vram_peak_bytes() >= (*kv_only)->vram_peak_bytes() + n_host * kv_layer);

  opt.placement = cpu_blocks(n_layer, 0, 2, false, true, false);
  host_kv(opt.placement, spec);
  auto plain = runtime::CudaForward::create(model.value(), opt);
  REQUIRE(plain.is_ok());
  const auto want = test::run_prompt_then_decode(**plain, tokens, n_prompt);

  opt.trace = std::make_shared<Trace>();
  auto traced = runtime::CudaForward::create(model.value(), opt);
  REQUIRE(traced.is_ok());
  const auto got = test::run_prompt_then_decode(**traced, tokens, n_prompt);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  std::map<std::string, size_t> cpu_spans;
  for (const auto& s : test::trace_spans(*opt.trace))
    if (s.track == "cpu compute") ++cpu_spans[s.name];
  // The prompt's chunks (ubatch 16 rows: on the CPU) + 8 decode steps: one span per host-KV write
  // and attention, and one per cpu FFN block (the whole block on the host, not one per matrix).
  const size_t evals = (n_prompt + 15) / 16 + 8;
  for (uint32_t il = 0; il < n_layer; ++il) {
    INFO("layer " << il);
    CHECK(cpu_spans["attention " + std::to_string(il)] >= 9);
    CHECK(cpu_spans["kv_write " + std::to_string(il)] >= 9);
    if (il % 2 == 0) CHECK(cpu_spans[runtime::block_label(runtime::Block::ffn, il)] == evals);
  }
}

TEST_CASE("cpu-tier blocks run prefill chunks on the GPU through the ring, bit-identical to resident", "[gpu][host-tiers]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  // Chunks of more than kMaxExactRows tokens copy cpu-tier blocks from the host mapping through a
  // pinned bounce buffer into the staging ring: the same kernels on the same bytes as resident,
  // so those rows' logits are bit-identical; smaller chunks and decode steps use the CPU.
  for (const char* dir : {"gemma3-swa-q4k", "llama", "qwen3"}) {
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    auto tokens = test::read_tokens(base + "tokens.txt");
    const size_t n_prompt = tokens.size() - 8;
    auto model = runtime::Model::load(base + "model.gguf");
    REQUIRE(model.is_ok());
    const auto& spec = (*model)->spec;
    const uint32_t n_vocab = spec.hp.n_vocab, chunk = 20;
    REQUIRE(chunk > runtime::kMaxExactRows);
    runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = chunk, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = {}, .trace = {}};
    auto resident = runtime::CudaForward::create(model.value(), opt);
    REQUIRE(resident.is_ok());
    const auto want = test::run_prompt_then_decode(**resident, tokens, n_prompt);
    for (bool with_stream : {false, true}) {
      INFO(dir << (with_stream ? ": cpu blocks and streamed ones" : ": cpu blocks"));
      opt.placement = cpu_blocks(spec.hp.n_layer, 0, 2, true, true, true);
      opt.ring_slots = 3;
      if (with_stream) {
        for (uint32_t il = 1; il < spec.hp.n_layer; il += 2)
          opt.placement.attention[il] = opt.placement.ffn[il] = Tier::stream;
        opt.ring_slots = 2;
      }
      auto e = runtime::CudaForward::create(model.value(), opt);
      INFO((e.is_ok() ? std::string() : e.message()));
      REQUIRE(e.is_ok());
      for (int pass = 0; pass < 2; ++pass) {  // again after truncate(0): the ring state carries over
        (*e)->truncate(0);
        const auto got = test::run_prompt_then_decode(**e, tokens, n_prompt);
        REQUIRE(got.size() == want.size());
        size_t rows_gpu = 0;
        for (size_t c0 = 0; c0 < n_prompt; c0 += chunk) {
          const size_t rows = std::min<size_t>(chunk, n_prompt - c0);
          if (rows <= runtime::kMaxExactRows) continue;  // on the CPU
          rows_gpu += rows;
          CHECK(std::memcmp(got.data() + c0 * n_vocab, want.data() + c0 * n_vocab, rows * n_vocab * sizeof(float)) == 0);
        }
        CHECK(rows_gpu > 0);
        const auto diff = test::compare_logits(got, want, n_vocab, 5e-2);
        CHECK(diff.top1_mismatch == 0);
        CHECK(diff.kl_mean <= 1e-3);
      }
    }
  }
}
