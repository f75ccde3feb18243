// Device failures mid-step (kernels/cuda/cuda_api.h inject_error: the nth checked CUDA call fails):
// the eval reports an error naming the operation and the weight block with its tier, leaves the
// sequence where it was, and produces no logits from the failed step; the CLI exits non-zero with
// one line. Skips without a GPU.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <sys/wait.h>

#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/device_info.h"
#include "logits_compare.h"
#include "runtime/cuda_forward.h"
#include "cli_run.h"
#include "test_util.h"

using namespace strata;

namespace {

struct Disarm {
  ~Disarm() { kernels::cuda::inject_error(0); }
};

// ring_slots: the staging ring (the streamed() cases run with 2).
runtime::ForwardOptions options(offload::Placement r, uint32_t ring_slots = 3) {
  return {.n_ctx = 128, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16, .placement = std::move(r),
          .ring_slots = ring_slots, .trace = {}};
}

// Every other layer's attention and FFN streamed, one of them from the disk tier (2 ring slots).
offload::Placement streamed(uint32_t n_layer) {
  offload::Placement r;
  for (uint32_t il = 0; il < n_layer; ++il) {
    const offload::Tier t = il % 2 == 1 ? offload::Tier::stream : offload::Tier::gpu;
    r.attention.push_back(il == 1 ? offload::Tier::disk : t);
    r.ffn.push_back(t);
  }
  return r;
}

}  // namespace

TEST_CASE("A device error mid-step fails the eval cleanly and names the block", "[gpu][faults]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  Disarm disarm;
  const std::string base = test::testdata("models/gemma3-swa-q4k/");
  auto tokens = test::read_tokens(base + "tokens.txt");
  REQUIRE(tokens.size() >= 20);
  auto model = runtime::Model::load(base + "model.gguf");
  REQUIRE(model.is_ok());
  const uint32_t n_layer = (*model)->spec.hp.n_layer;
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 12);

  // The logits of every decode step, from an engine that never fails: in the GPU layout (the
  // default), and in the GGUF layout that placements with a disk-tier block run (ForwardOptions::
  // gpu_layout).
  std::vector<float> logits;
  auto clean_logits = [&](bool gpu_layout) {
    auto opt = options({});
    opt.gpu_layout = gpu_layout;
    auto clean = runtime::CudaForward::create(model.value(), opt);
    REQUIRE(clean.is_ok());
    REQUIRE((*clean)->eval(prompt, runtime::Logits::last, logits).is_ok());
    std::vector<std::vector<float>> out;
    for (size_t i = 12; i < 20; ++i) {
      REQUIRE((*clean)->eval(std::span(&tokens[i], 1), runtime::Logits::last, logits).is_ok());
      out.push_back(logits);
    }
    return out;
  };
  const std::vector<std::vector<float>> expected = clean_logits(true);
  const std::vector<std::vector<float>> expected_gguf = clean_logits(false);

  SECTION("resident: the error is reported, the step can be retried, and the retry is exact") {
    auto e = runtime::CudaForward::create(model.value(), options({}));
    REQUIRE(e.is_ok());
    REQUIRE((*e)->eval(prompt, runtime::Logits::last, logits).is_ok());
    // The first decode step captures the CUDA graph; the failures below hit graph launches,
    // the copies around them, and (nth large) the kernels of a graph-less prefill.
    REQUIRE((*e)->eval(std::span(&tokens[12], 1), runtime::Logits::last, logits).is_ok());
    REQUIRE(logits == expected[0]);
    size_t step = 1;
    for (uint64_t nth : {1, 2, 3}) {
      kernels::cuda::inject_error(nth);
      std::vector<float> failed = {42.0f};
      const uint32_t before = (*e)->n_past();
      Status s = (*e)->eval(std::span(&tokens[12 + step], 1), runtime::Logits::last, failed);
      INFO("nth " << nth << ": " << s.message());
      REQUIRE_FALSE(s.is_ok());
      CHECK(s.message().find("injected") != std::string::npos);
      CHECK(s.message().find("CUDA forward") != std::string::npos);
      CHECK((*e)->n_past() == before);
      kernels::cuda::inject_error(0);
      REQUIRE((*e)->eval(std::span(&tokens[12 + step], 1), runtime::Logits::last, logits).is_ok());
      CHECK(logits == expected[step]);
      ++step;
    }
  }

  SECTION("streamed and disk tiers: the message names the block and its tier") {
    auto e = runtime::CudaForward::create(model.value(), options(streamed(n_layer), 2));
    REQUIRE(e.is_ok());
    REQUIRE((*e)->eval(prompt, runtime::Logits::last, logits).is_ok());
    bool named_streamed = false;
    // A decode step makes tens of checked calls; walk the failure through them. Each failed step
    // is retried cleanly, so the sequence stays in step with the clean engine.
    size_t step = 0;
    for (uint64_t nth = 1; nth <= 61 && step < expected_gguf.size(); nth += 12) {
      kernels::cuda::inject_error(nth);
      const uint32_t before = (*e)->n_past();
      Status s = (*e)->eval(std::span(&tokens[12 + step], 1), runtime::Logits::last, logits);
      kernels::cuda::inject_error(0);
      INFO("nth " << nth << ": " << s.message());
      REQUIRE_FALSE(s.is_ok());
      CHECK(s.message().find("injected") != std::string::npos);
      CHECK((*e)->n_past() == before);
      if (s.message().find("streamed from") != std::string::npos) named_streamed = true;
      if (s.message().find("block ") == std::string::npos)
        WARN("failure outside a weight block: " << s.message());
      REQUIRE((*e)->eval(std::span(&tokens[12 + step], 1), runtime::Logits::last, logits).is_ok());
      CHECK(logits == expected_gguf[step]);
      ++step;
    }
    CHECK(named_streamed);
  }
}

TEST_CASE("strata generate exits non-zero with one line on a device error", "[gpu][faults][cli]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const auto dir = test::temp_dir("cuda-fault-cli");
  const std::string err_path = (dir / "stderr").string(), out_path = (dir / "stdout").string();
  const std::string model = test::testdata("models/gemma3-swa-q4k/model.gguf");
  // Without graphs a decode step of this 4-layer model makes ~100 checked calls, so the 400th
  // falls a few steps into generation.
  const std::string cmd = "STRATA_CUDA_GRAPHS=0 STRATA_INJECT_CUDA_ERROR=400 " + test::strata_binary() + " generate -m " +
                          model + " --device cuda -p 'Hello world' -n 24 --ignore-eos --temp 0 -q >" + out_path +
                          " 2>" + err_path;
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  std::string err;
  if (FILE* f = std::fopen(err_path.c_str(), "r")) {
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) err.append(buf.data(), n);
    std::fclose(f);
  }
  INFO(err);
  CHECK(err.find("injected") != std::string::npos);
  CHECK(err.find("error") != std::string::npos);
}
