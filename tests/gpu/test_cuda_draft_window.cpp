// Attention sinks + window on the GPU (a drafter's window, runtime/draft_window.h): the
// flash-decoding kernel (attention_decode.cu: the sinks as split z = 0, the window's chunks after
// them; unsplit, the masked walk) against the CPU reference (kernels/cpu/attention.h) at 1, 2 and
// 8 queries, f16 / q8 / q4 KV, sinks 4..64, recent 64..1024, several thousand keys; a row of a
// k-query call equals the query alone bit for bit; and greedy speculative decoding through a
// draft window on the CUDA engine (step graphs keyed by the window) gives the plain text.
// Skips without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "attention_test_util.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention_decode.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/device_info.h"
#include "kv/kv_quant.h"
#include "runtime/cuda_forward.h"
#include "spec/spec_test_util.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::test;
namespace kc = strata::kernels::cuda;
namespace cpu = strata::kernels::cpu;

// n_q consecutive queries ending at `last` over a linear store (capacity > last: sinks need one).
struct SinkFixture {
  int64_t hd, n_head_kv, group, n_head, width, row, capacity, window, sinks;
  GgmlType kt, vt;
  std::vector<int32_t> pos;
  std::vector<uint8_t> k, v;
  std::vector<float> q;
  DevBuf dk, dv;
  kc::AttentionShapeDev s{};
  kc::KvStoreDev kv{};

  SinkFixture(int64_t hd_, int64_t group_, int64_t window_, int64_t sinks_, GgmlType kt_, GgmlType vt_, int64_t n_q,
              int32_t last, Rng& rng)
      : hd(hd_), n_head_kv(group_ >= 4 ? 2 : 3), group(group_), n_head(n_head_kv * group_), width(n_head_kv * hd_),
        row(n_head * hd_), capacity(int64_t(last) + 1 + int64_t(rng.next_u64() % 7)), window(window_),
        sinks(sinks_), kt(kt_), vt(vt_), k(random_kv_store(kt_, capacity, width, rng)),
        v(random_kv_store(vt_, capacity, width, rng)),
        q(random_normal(size_t(n_q * row), rng, 3.0f)), dk(to_device(k)), dv(to_device(v)) {
    for (int64_t i = 0; i < n_q; ++i) pos.push_back(last - int32_t(n_q) + 1 + int32_t(i));
    s.n_head = n_head;
    s.n_head_kv = n_head_kv;
    s.head_dim = hd;
    s.window = window;
    s.scale = 1.0f / std::sqrt(float(hd));
    s.sinks = sinks;
    kv = {dk.as<void>(), dv.as<void>(), kt, vt, capacity};
  }

  std::vector<float> gpu(size_t first, size_t n, bool workspace = true) {
    std::vector<float> qs(q.begin() + long(first * size_t(row)), q.begin() + long((first + n) * size_t(row)));
    std::vector<int32_t> ps(pos.begin() + long(first), pos.begin() + long(first + n));
    DevBuf dq = to_device(qs), dpos = to_device(ps), dout(qs.size() * 4);
    dout.poison();
    const size_t ws_bytes = workspace ? kc::attention_workspace_bytes(int64_t(n), s, capacity) : 0;
    DevBuf ws(ws_bytes);
    ws.poison();
    const kc::Workspace w{ws_bytes ? ws.as<void>() : nullptr, ws_bytes};
    REQUIRE(kc::attention_workspace_clear(w, nullptr));
    REQUIRE(kc::attention(dq.as<float>(), dpos.as<int32_t>(), int64_t(n), kv, s, dout.as<float>(), w, nullptr));
    return dout.download<float>(qs.size());
  }

  AttentionRef reference() const {
    AttentionRef ref{std::vector<float>(q.size()), std::vector<float>(q.size())};
    const cpu::AttentionShape cs{n_head, n_head_kv, hd, window, s.scale, sinks};
    cpu::attention(q.data(), pos.data(), int64_t(pos.size()), cpu::KvStore{k.data(), v.data(), kt, vt, capacity}, cs,
                   ref.out.data());
    const MagnitudeKv m = magnitude_kv(kt, k, vt, v, capacity, width);
    cpu::attention(q.data(), pos.data(), int64_t(pos.size()),
                   cpu::KvStore{m.k.data(), m.v.data(), GgmlType::F32, GgmlType::F32, capacity}, cs,
                   ref.magnitude.data());
    return ref;
  }

  std::string describe() const {
    return fmt::format("head_dim {} n_head_kv {} group {} window {} sinks {} capacity {} K {} V {} n_q {} pos {}..{}", hd,
                       n_head_kv, group, window, sinks, capacity, kv::kv_type_name(kt), kv::kv_type_name(vt),
                       pos.size(), pos.front(), pos.back());
  }
};

constexpr GgmlType kTypes[] = {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1};

}  // namespace

TEST_CASE("decode attention with sinks: 1, 2 and 8 queries over f16, q8 and q4 KV match the CPU", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kTypes) {
    for (const int64_t n_q : {1, 2, 8}) {
      for (const int64_t sinks : {4, 16, 64}) {
        for (const int64_t recent : {64, 256, 1024}) {
          const int64_t hd = rng.uniform() < 0.5f ? 128 : 64;
          const int64_t group = int64_t(1) << (rng.next_u64() % 4);
          // Several thousand keys; sometimes a context the window barely cuts (the runs touch).
          const int32_t last = rng.uniform() < 0.2f ? int32_t(sinks + recent + rng.next_u64() % 8)
                                                    : int32_t(2000 + rng.next_u64() % 6000);
          SinkFixture f(hd, group, recent, sinks, t, t, n_q, last, rng);
          INFO(f.describe());
          check_decode_attention_close(f.gpu(0, f.pos.size()), f.reference());
          // Without a workspace the kernel runs unsplit: the masked walk over [0, pos].
          if (recent == 256) check_decode_attention_close(f.gpu(0, f.pos.size(), false), f.reference());
        }
      }
    }
  }
  const std::pair<GgmlType, GgmlType> mixed[] = {{GgmlType::Q8_0, GgmlType::Q4_1}, {GgmlType::F16, GgmlType::Q8_0}};
  for (const auto& [kt, vt] : mixed) {
    SinkFixture f(128, 2, 512, 64, kt, vt, 3, 40000 + int32_t(rng.next_u64() % 1000), rng);
    INFO(f.describe());
    check_decode_attention_close(f.gpu(0, f.pos.size()), f.reference());
  }
}

TEST_CASE("decode attention with sinks: a row of a k-query call equals the query alone, bit for bit", "[gpu][attention]") {
  if (!have_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (const GgmlType t : kTypes) {
    for (const int64_t n_q : {2, 8}) {
      SinkFixture f(128, int64_t(1) << (rng.next_u64() % 3), 64 + int64_t(rng.next_u64() % 960),
                    4 + int64_t(rng.next_u64() % 61), t, t, n_q, int32_t(2000 + rng.next_u64() % 20000), rng);
      INFO(f.describe());
      const std::vector<float> all = f.gpu(0, f.pos.size());
      for (size_t i = 0; i < f.pos.size(); ++i) {
        const std::vector<float> one = f.gpu(i, 1);
        INFO("query " << i << " at " << f.pos[i]);
        REQUIRE(std::memcmp(one.data(), all.data() + i * size_t(f.row), one.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("GPU greedy speculative decoding through a draft window equals GPU plain greedy decoding", "[gpu][spec]") {
  if (kernels::cuda::devices().empty()) {
    WARN("skipped: no CUDA device");
    return;
  }
  const std::string path = test::small_spec_model(33, GgmlType::Q8_0);
  auto model = runtime::Model::load(path);
  REQUIRE(model.is_ok());
  const uint32_t n_layer = (*model)->spec.hp.n_layer, n_vocab = (*model)->spec.hp.n_vocab;
  for (const GgmlType kv : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    runtime::ForwardOptions opt{.n_ctx = 320, .ubatch = 16, .k_type = kv, .v_type = kv, .placement = {}, .trace = {}};
    auto gpu = runtime::CudaForward::create(*model, opt);
    INFO((gpu.is_ok() ? std::string() : gpu.message()));
    REQUIRE(gpu.is_ok());
    runtime::Engine& e = **gpu;
    REQUIRE(e.supports_draft_window());
    Rng rng(kv == GgmlType::F16 ? 1 : 2);
    std::vector<int32_t> prompt(120);
    for (auto& t : prompt) t = int32_t(rng.next_u32() % n_vocab);
    const auto want = test::generate(e, prompt, 80, spec::SpecConfig{}, test::greedy_params());
    // Layer 3 is the model's only full-attention layer: subset drafts run it (first and last
    // layers always run), so they go through the window; early exit at d = 3 drafts sliding
    // layers only (the window is a no-op there, verification still from layer 0).
    for (const std::string mode : {"subset", "early:d=3", "early:d=3,tree=2", "auto:d=2"}) {
      INFO("KV " << ggml_type_info(kv).name << " mode " << mode);
      auto c = spec::parse_spec(mode, 6, n_layer);
      REQUIRE(c.is_ok());
      c->window = *spec::parse_draft_window("4,32");
      spec::SpecStats st;
      CHECK(test::generate(e, prompt, 80, *c, test::greedy_params(), &st) == want);
      CHECK(st.draft_window == "4,32");
    }
  }
}
