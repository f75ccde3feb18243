// CUDA graphs of step shapes (runtime/cuda_step_graphs.h) against the same engine run eagerly
// (STRATA_CUDA_GRAPHS=0), with the default policy (every step shape): decode steps, early-exit drafts (layers [0, d) with the residual stream
// handed back), verification from layer d and rollbacks, interleaved, resident and streamed, so
// that warm and cold graph steps, eager prefill between graph steps and the ring's tail prefetch
// all occur. The same kernels on the same bytes: logits and residual streams must be bit-identical,
// and the graph run must actually have launched graphs. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/device_info.h"
#include "runtime/cuda_forward.h"
#include "logits_compare.h"
#include "placements.h"
#include "test_util.h"

using namespace strata;

namespace {

using offload::Tier;

offload::Placement streamed_every(uint32_t n_layer, uint32_t every, bool ffn_only, bool head) {
  offload::Placement r;
  for (uint32_t il = 0; il < n_layer; ++il) {
    const bool pick = il % every == every - 1;  // deep layers of each group: the draft prefix may stay resident
    r.attention.push_back(pick && !ffn_only ? Tier::stream : Tier::gpu);
    r.ffn.push_back(pick ? Tier::stream : Tier::gpu);
  }
  r.head = head ? Tier::stream : Tier::gpu;
  return r;
}

struct Run {
  std::vector<float> out;  // every logits vector and residual stream, in order
  runtime::CudaForward::GraphStats graphs;
};

void require_ok(const Status& s) {
  INFO((s.is_ok() ? std::string() : s.message()));
  REQUIRE(s.is_ok());
}

// Prefill, then rounds of: two drafts through layers [0, d), a verify of both from layer d, a plain
// decode step, and every other round a rollback of the last position; twice (truncate(0) between).
Run speculative_pattern(runtime::CudaForward& e, const std::vector<int32_t>& tokens, size_t n_prompt, uint32_t d) {
  Run run;
  const auto& hp = e.model().spec.hp;
  const size_t width = hp.n_embd;
  std::vector<float> logits, hidden(2 * width);
  auto keep = [&](const std::vector<float>& v) { run.out.insert(run.out.end(), v.begin(), v.end()); };
  for (int pass = 0; pass < 2; ++pass) {
    e.truncate(0);
    require_ok(e.eval(std::vector<int32_t>(tokens.begin(), tokens.begin() + n_prompt), runtime::Logits::last, logits));
    keep(logits);
    for (int round = 0; e.n_past() + 4 <= tokens.size(); ++round) {
      const uint32_t p = e.n_past();
      for (uint32_t i = 0; i < 2; ++i) {
        const runtime::LayerRange draft{0, d, nullptr, hidden.data() + i * width, {}};
        require_ok(e.eval_layers(std::span(&tokens[p + i], 1), p + i, draft, runtime::Logits::last, logits));
        keep(logits);
      }
      keep(hidden);
      const runtime::LayerRange verify{d, 0, hidden.data(), nullptr, {}};
      require_ok(e.eval_layers(std::span(&tokens[p], 2), p, verify, runtime::Logits::all, logits));
      keep(logits);
      REQUIRE(e.n_past() == p + 2);
      require_ok(e.eval(std::span(&tokens[p + 2], 1), runtime::Logits::last, logits));
      keep(logits);
      if (round % 2 == 1) e.truncate(e.n_past() - 1);
    }
  }
  run.graphs = e.graph_stats();
  return run;
}

}  // namespace

TEST_CASE("Graph steps equal eager steps bit for bit, resident, streamed and with host work", "[gpu][streaming][graphs]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  for (const char* dir : {"gemma3-swa-q4k", "llama"}) {
    const std::string base = test::testdata(std::string("models/") + dir + "/");
    auto tokens = test::read_tokens(base + "tokens.txt");
    REQUIRE(tokens.size() >= 24);
    const size_t n_prompt = tokens.size() - 12;
    auto model = runtime::Model::load(base + "model.gguf");
    REQUIRE(model.is_ok());
    const uint32_t n_layer = (*model)->spec.hp.n_layer;
    REQUIRE(n_layer >= 2);
    const uint32_t d = n_layer / 2;
    struct Case { const char* name; offload::Placement r; uint32_t slots; bool host = false; bool shared = false; };
    // Host work (cpu-tier FFN blocks with int8 CPU kernels, host KV) is in the graphs as host nodes.
    offload::Placement host_kv = test::cpu_ffn_odd_layers(n_layer);
    for (uint32_t il = 0; il < n_layer; ++il)
      host_kv.kv.push_back((*model)->spec.window(il) == 0 ? offload::KvTier::host : offload::KvTier::gpu);
    const Case cases[] = {
        {"resident", {}, 3},
        {"odd layers' FFN on the CPU, their attention streamed, 2 slots", test::cpu_ffn_odd_layers(n_layer), 2, true},
        {"cpu-tier FFN blocks and host KV, 2 slots", host_kv, 2, true},
        {"every layer streamed + head, 3 slots", streamed_every(n_layer, 1, false, true), 3},
        {"every other layer's FFN, 2 slots", streamed_every(n_layer, 2, true, false), 2},
        // Two-ended rings (offload/shared_ring.h): alternating sizes; and cpu-tier FFN blocks, which
        // cross the ring only in prefill chunks, beside attention blocks they do not fit beside.
        {"every layer streamed + head, two-ended", streamed_every(n_layer, 1, false, true), 2, false, true},
        {"odd layers' FFN on the CPU, their attention streamed, two-ended", test::cpu_ffn_odd_layers(n_layer), 2, true,
         true},
        {"deep half streamed, 4 slots", [&] {
           offload::Placement r = streamed_every(n_layer, 1, false, false);
           for (uint32_t il = 0; il < d; ++il) r.attention[il] = r.ffn[il] = Tier::gpu;
           return r;
         }(), 4},
    };
    for (const auto& c : cases)
    for (bool layout : {false, true}) {
      INFO(dir << ": " << c.name << (layout ? ", GPU weight layout" : ", GGUF layout"));
      const runtime::ForwardOptions opt{.n_ctx = 256, .ubatch = 16, .k_type = GgmlType::F16, .v_type = GgmlType::F16,
                                        .placement = c.r, .ring_slots = c.slots, .shared_ring = c.shared,
                                        .gpu_layout = layout, .cpu_int8 = c.host, .trace = {}};
      ::setenv("STRATA_CUDA_GRAPHS", "0", 1);
      auto eager = runtime::CudaForward::create(model.value(), opt);
      REQUIRE(eager.is_ok());
      const Run want = speculative_pattern(**eager, tokens, n_prompt, d);
      ::unsetenv("STRATA_CUDA_GRAPHS");  // the default: every step shape
      CHECK(want.graphs.launches == 0);
      auto graphed = runtime::CudaForward::create(model.value(), opt);
      REQUIRE(graphed.is_ok());
      const Run got = speculative_pattern(**graphed, tokens, n_prompt, d);
      // Every draft, verify and decode step replays a graph; shapes repeat, so far fewer captures.
      CHECK(got.graphs.launches >= 20);
      CHECK(got.graphs.captures < got.graphs.launches / 2);
      REQUIRE(got.out.size() == want.out.size());
      size_t differ = 0;
      for (size_t i = 0; i < got.out.size(); ++i) differ += std::memcmp(&got.out[i], &want.out[i], sizeof(float)) != 0;
      CHECK(differ == 0);
      // Streamed: the graph steps' copies are counted like eager ones (same blocks per step).
      if (c.r.any_streamed()) CHECK((*graphed)->streamed_bytes() > 0);
    }
  }
}
