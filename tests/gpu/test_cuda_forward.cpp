// The resident GPU forward pass against the CPU engine and the independent reference logits.
// Skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <iterator>

#include "kernels/cuda/device_info.h"
#include "runtime/cpu_forward.h"
#include "runtime/cuda_forward.h"
#include "runtime/sampler.h"
#include "logits_compare.h"
#include "test_util.h"

using namespace strata;

namespace {

using test::read_f32;
using test::read_tokens;

std::vector<float> run(runtime::Engine& e, const std::vector<int32_t>& tokens, bool one_by_one) {
  std::vector<float> all, one;
  if (!one_by_one) {
    REQUIRE(e.eval(tokens, runtime::Logits::all, all).is_ok());
    return all;
  }
  for (int32_t t : tokens) {
    Status s = e.eval(std::span(&t, 1), runtime::Logits::last, one);
    INFO((s.is_ok() ? std::string() : s.message()));
    REQUIRE(s.is_ok());
    // The CUDA engine takes the greedy argmax on the device (cuda_api.h argmax_key): the sampler's.
    if (e.device_name() == "cuda") CHECK(e.last_argmax() == runtime::argmax(one));
    all.insert(all.end(), one.begin(), one.end());
  }
  return all;
}

}  // namespace

TEST_CASE("GPU logits match the references for every testdata model", "[gpu][forward]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  for (const char* dir : {"gemma3-swa", "gemma3-swa-q4k", "llama", "qwen3"}) {
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    const auto tokens = read_tokens(base + "tokens.txt");
    const bool has_f64 = std::string(dir).find("gemma3") == 0;
    const auto ref = read_f32(base + (has_f64 ? "logits.f64ref.f32" : "logits.llamacpp.f32"));
    const size_t n_vocab = ref.size() / tokens.size();
    auto model = runtime::Model::load(base + "model.gguf");
    REQUIRE(model.is_ok());
    for (GgmlType kv : {GgmlType::F32, GgmlType::F16}) {
      // Token by token (GEMV, decode attention) and whole prompt in chunks of 40 (GEMM, prefill
      // attention, ring wrap inside a chunk).
      for (bool one : {true, false}) {
        INFO(dir << (kv == GgmlType::F16 ? " f16 KV" : " f32 KV") << (one ? " decode" : " prefill"));
        auto gpu = runtime::CudaForward::create(model.value(), {.n_ctx = 256, .ubatch = 40, .k_type = kv, .v_type = kv, .placement = {}, .trace = {}});
        INFO((gpu.is_ok() ? std::string() : gpu.message()));
        REQUIRE(gpu.is_ok());
        const auto got = run(**gpu, tokens, one);
        const auto diff = test::compare_logits(got, ref, n_vocab, 1e-2);
        REQUIRE(diff.same_size);
        const double worst = diff.worst_ratio;
        const int mismatch = diff.top1_mismatch;
        // Tolerances: decode computes in f32 end to end for float weights (as the CPU engine:
        // ~1e-6 here), while quantised weights take the int8-activation GEMV (kernels/cuda/
        // gemv_q8.cuh: activations rounded to 8 bits per 32, ~1.5e-2 of max|logit| on this
        // 256-wide model; judged by KL, the measure, <= 1e-3 for quantised models);
        // prefill multiplies f16-rounded activations on tensor cores (~1e-3 of max|logit|); f16
        // KV adds its own rounding (the CPU engine with f16 KV is ~5e-4 away).
        const bool quantised = std::string(dir).find("q4k") != std::string::npos;
        const double tol = (one ? (quantised ? 3e-2 : 1e-4) : 5e-3) + (kv == GgmlType::F16 ? 2e-3 : 0.0);
        INFO("worst max|diff| / max|logit| = " << worst << ", KL mean " << diff.kl_mean);
        WARN(dir << (kv == GgmlType::F16 ? " f16 KV" : " f32 KV") << (one ? " decode" : " prefill")
                 << ": worst ratio " << worst << ", KL mean " << diff.kl_mean);
        CHECK(worst < tol);
        CHECK(diff.kl_mean <= (quantised ? 1e-3 : 1e-4));
        CHECK(mismatch == 0);
      }
    }
  }
}

TEST_CASE("GPU engine with quantised KV matches the CPU engine with the same KV types", "[gpu][forward]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  // Both engines quantise K/V with the same codes (kv/kv_quant.h, kernels/cuda/kv_quant.cuh), but
  // from slightly different activations (GPU: f16 tensor-core prefill, int8-activation GEMV), so a
  // few codes land one step apart: bounds are the float ones plus a step's worth of effect. A wrong
  // block offset, nibble order or ring slot moves logits by O(1) and flips top-1.
  struct P { GgmlType k, v; double extra, kl; };
  const P pairs[] = {{GgmlType::Q8_0, GgmlType::Q8_0, 2e-2, 1e-3}, {GgmlType::Q4_1, GgmlType::Q4_1, 1e-1, 5e-3},
                     {GgmlType::Q8_0, GgmlType::Q4_1, 1e-1, 5e-3}, {GgmlType::F16, GgmlType::Q4_1, 1e-1, 5e-3}};
  for (const char* dir : {"gemma3-swa-q4k", "llama", "qwen3"}) {  // head_dim 64, 32, 64
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    const auto tokens = read_tokens(base + "tokens.txt");
    auto model = runtime::Model::load(base + "model.gguf");
    REQUIRE(model.is_ok());
    const bool quantised = std::string(dir).find("q4k") != std::string::npos;
    for (const P& p : pairs) {
      const runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = 40, .k_type = p.k, .v_type = p.v, .placement = {}, .trace = {}};
      auto cpu = runtime::CpuForward::create(model.value(), opt);
      REQUIRE(cpu.is_ok());
      const auto ref = run(**cpu, tokens, false);
      const size_t n_vocab = ref.size() / tokens.size();
      for (bool one : {true, false}) {
        INFO(dir << " K " << ggml_type_info(p.k).name << " V " << ggml_type_info(p.v).name << (one ? " decode" : " prefill"));
        auto gpu = runtime::CudaForward::create(model.value(), opt);
        INFO((gpu.is_ok() ? std::string() : gpu.message()));
        REQUIRE(gpu.is_ok());
        const auto got = run(**gpu, tokens, one);
        const auto diff = test::compare_logits(got, ref, n_vocab, 1e-1);
        REQUIRE(diff.same_size);
        const double tol = (one ? (quantised ? 3e-2 : 1e-4) : 5e-3) + p.extra;
        INFO("worst max|diff| / max|logit| = " << diff.worst_ratio << ", KL mean " << diff.kl_mean);
        WARN(dir << " K " << ggml_type_info(p.k).name << " V " << ggml_type_info(p.v).name << (one ? " decode" : " prefill")
                 << " vs CPU: worst ratio " << diff.worst_ratio << ", KL mean " << diff.kl_mean);
        CHECK(diff.worst_ratio < tol);
        CHECK(diff.kl_mean <= p.kl);
        CHECK(diff.top1_mismatch == 0);
      }
    }
  }
}

TEST_CASE("GPU engine rejects bad requests like the CPU engine", "[gpu][forward]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  auto model = runtime::Model::load(test::testdata("models/llama/model.gguf"));
  REQUIRE(model.is_ok());
  auto gpu = runtime::CudaForward::create(model.value(), {.n_ctx = 8, .ubatch = 4, .placement = {}, .trace = {}});
  REQUIRE(gpu.is_ok());
  std::vector<float> logits;
  const std::vector<int32_t> bad = {2, 512};
  CHECK((*gpu)->eval(bad, runtime::Logits::last, logits).message().find("out of range") != std::string::npos);
  const std::vector<int32_t> nine(9, 5);
  CHECK((*gpu)->eval(nine, runtime::Logits::last, logits).message().find("context full") != std::string::npos);
  CHECK((*gpu)->n_past() == 0);
}

namespace {

// Greedy continuation of `prompt` for n tokens.
std::vector<int32_t> greedy(runtime::Engine& e, const std::vector<int32_t>& prompt, int n) {
  std::vector<float> logits;
  std::vector<int32_t> out;
  Status s = e.eval(prompt, runtime::Logits::last, logits);
  REQUIRE(s.is_ok());
  for (int i = 0; i < n; ++i) {
    const int32_t next = runtime::argmax(logits);
    if (e.device_name() == "cuda") CHECK(e.last_argmax() == next);
    out.push_back(next);
    s = e.eval(std::span(&next, 1), runtime::Logits::last, logits);
    REQUIRE(s.is_ok());
  }
  return out;
}

}  // namespace

TEST_CASE("GPU greedy decoding gives the CPU engine's tokens on every testdata model", "[gpu][forward]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  for (const char* dir : {"gemma3-swa", "gemma3-swa-q4k", "llama", "qwen3"}) {
    INFO(dir);
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    auto model = runtime::Model::load(base + "model.gguf");
    REQUIRE(model.is_ok());
    auto tokens = read_tokens(base + "tokens.txt");
    tokens.resize(std::min<size_t>(tokens.size(), 8));
    const runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}};
    auto cpu = runtime::CpuForward::create(model.value(), opt);
    auto gpu = runtime::CudaForward::create(model.value(), opt);
    REQUIRE(cpu.is_ok());
    REQUIRE(gpu.is_ok());
    // 96 tokens: well past the sliding window (16 on the gemma3 models), so the rings wrap.
    CHECK(greedy(**gpu, tokens, 96) == greedy(**cpu, tokens, 96));
  }
}
