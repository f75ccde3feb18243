// The executor's half of a plan with the host-side tiers: residency_from_plan maps Tier::cpu and
// KvTier::host, and plan_for_executor produces plans with cpu blocks and host KV when VRAM and
// pinned RAM are tiny (and refuses them when the caller does not allow them). CPU only: plans
// are pure data; the GPU tests (tests/gpu/test_host_tiers.cpp) run them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "offload/hardware_profile.h"
#include "runtime/residency.h"
#include "test_util.h"

using namespace strata;
using offload::KvTier;
using offload::Tier;

namespace {

offload::HardwareProfile profile(const std::string& name) {
  auto p = offload::load_profile(std::string(STRATA_SOURCE_DIR) + "/configs/hw/" + name + ".toml");
  REQUIRE(p.is_ok());
  return *p;
}

std::shared_ptr<const runtime::Model> load(const std::string& dir) {
  auto m = runtime::Model::load(test::testdata("models/" + dir + "/model.gguf"));
  INFO((m.is_ok() ? std::string() : m.message()));
  REQUIRE(m.is_ok());
  return m.value();
}

}  // namespace

TEST_CASE("residency_from_plan maps every tier, cpu and host KV included", "[residency]") {
  offload::Plan plan;
  plan.placement.attention = {Tier::gpu, Tier::stream, Tier::disk, Tier::cpu};
  plan.placement.ffn = {Tier::cpu, Tier::gpu, Tier::stream, Tier::disk};
  plan.placement.head = Tier::cpu;
  plan.placement.kv = {KvTier::gpu, KvTier::host, KvTier::gpu, KvTier::host};
  plan.ring_slots = 3;
  auto r = runtime::residency_from_plan(plan, 1000, 2000);
  INFO((r.is_ok() ? std::string() : r.message()));
  REQUIRE(r.is_ok());
  using V = std::vector<bool>;
  CHECK(r->attention_streamed == V{false, true, true, false});
  CHECK(r->attention_disk == V{false, false, true, false});
  CHECK(r->attention_cpu == V{false, false, false, true});
  CHECK(r->ffn_streamed == V{false, false, true, true});
  CHECK(r->ffn_disk == V{false, false, false, true});
  CHECK(r->ffn_cpu == V{true, false, false, false});
  CHECK(r->head_cpu);
  CHECK_FALSE(r->head_streamed);
  CHECK_FALSE(r->head_disk);
  CHECK(r->kv_host == V{false, true, false, true});
  CHECK(r->n_kv_host() == 2);
  CHECK(r->any_cpu());
  CHECK(r->any_kv_host());
  CHECK(r->any_streamed());
  CHECK(r->ring_slots == 3);
  CHECK(r->vram_budget == 1000);
  CHECK(r->pinned_budget == 2000);

  SECTION("a plan without host tiers has none") {
    plan.placement.attention.assign(4, Tier::gpu);
    plan.placement.ffn.assign(4, Tier::stream);
    plan.placement.head = Tier::gpu;
    plan.placement.kv.assign(4, KvTier::gpu);
    auto g = runtime::residency_from_plan(plan, 0, 0);
    REQUIRE(g.is_ok());
    CHECK_FALSE(g->any_cpu());
    CHECK_FALSE(g->any_kv_host());
    CHECK(g->any_streamed());
  }
  SECTION("a ragged plan is an error") {
    plan.placement.ffn.pop_back();
    auto bad = runtime::residency_from_plan(plan, 0, 0);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("one per layer"));
  }
}

TEST_CASE("place_kv_host moves the deepest full-attention layers only", "[residency]") {
  offload::ModelBlocks m;
  m.n_layer = 6;
  m.swa = {true, true, false, true, true, false};
  offload::Placement pl;
  runtime::place_kv_host(m, 1, pl);
  CHECK(pl.kv == std::vector<KvTier>{KvTier::gpu, KvTier::gpu, KvTier::gpu, KvTier::gpu, KvTier::gpu, KvTier::host});
  runtime::place_kv_host(m, runtime::kAllKvLayers, pl);
  CHECK(pl.kv == std::vector<KvTier>{KvTier::gpu, KvTier::gpu, KvTier::host, KvTier::gpu, KvTier::gpu, KvTier::host});
  runtime::place_kv_host(m, 0, pl);
  CHECK(std::count(pl.kv.begin(), pl.kv.end(), KvTier::host) == 0);
}

TEST_CASE("plan_for_executor puts blocks on the cpu tier when VRAM and pinned RAM are tiny", "[residency]") {
  for (const char* dir : {"llama", "gemma3-swa"}) {
    INFO(dir);
    auto model = load(dir);
    auto prof = profile("rtx3060-12g");
    offload::RunShape shape;
    shape.ctx = 256;
    shape.gen = 32;
    shape.prefill_chunk = 16;
    offload::Budgets roomy = offload::Budgets::of(prof);
    auto big = runtime::plan_for_executor(*model, prof, roomy, shape, 0);
    INFO((big.is_ok() ? std::string() : big.message()));
    REQUIRE(big.is_ok());
    CHECK_FALSE(big->residency.any_cpu());  // everything fits: nothing goes to the host
    // VRAM for the fixed costs and a staging ring of the largest block, no room for weights;
    // pinned RAM for the bounce buffers of that ring only.
    const auto& bl = big->blocks;
    uint64_t largest = bl.head.bytes;
    for (uint32_t il = 0; il < bl.n_layer; ++il)
      largest = std::max({largest, bl.attention[il].bytes, bl.ffn[il].bytes});
    const auto& u = big->plan.usage;
    offload::Budgets tiny = roomy;
    tiny.vram = u.vram_context + u.vram_scratch + u.vram_kv + 4 * largest;
    tiny.pinned = 4 * largest;
    tiny.allow_disk = false;
    auto p = runtime::plan_for_executor(*model, prof, tiny, shape, 0);
    INFO((p.is_ok() ? std::string() : p.message()));
    REQUIRE(p.is_ok());
    const auto& pl = p->plan.placement;
    const auto& r = p->residency;
    CHECK(r.any_cpu());
    for (uint32_t il = 0; il < bl.n_layer; ++il) {
      CHECK(r.attention_cpu[il] == (pl.attention[il] == Tier::cpu));
      CHECK(r.ffn_cpu[il] == (pl.ffn[il] == Tier::cpu));
      CHECK_FALSE((r.attention_cpu[il] && r.attention_streamed[il]));
      CHECK_FALSE((r.ffn_cpu[il] && r.ffn_streamed[il]));
    }
    CHECK(r.head_cpu == (pl.head == Tier::cpu));
    CHECK(p->plan.usage.host_cpu_weights > 0);
    CHECK(p->plan.usage.vram_total() <= tiny.vram);
    CHECK(r.vram_budget == tiny.vram - prof.cuda_context.bytes);

    // The same budgets without the cpu tier: nothing fits.
    tiny.allow_cpu = false;
    auto none = runtime::plan_for_executor(*model, prof, tiny, shape, 0);
    CHECK_FALSE(none.is_ok());
  }
}

TEST_CASE("plan_for_executor places full-attention KV in host RAM", "[residency]") {
  auto model = load("gemma3-swa");
  const auto& spec = model->spec;
  uint32_t n_full = 0;
  for (uint32_t il = 0; il < spec.hp.n_layer; ++il) n_full += spec.window(il) == 0;
  REQUIRE(n_full >= 1);
  REQUIRE(n_full < spec.hp.n_layer);  // sliding layers too: they must stay in VRAM
  auto prof = profile("rtx3060-12g");
  offload::RunShape shape;
  shape.ctx = 2048;
  shape.gen = 32;
  shape.prefill_chunk = 16;
  const auto b = offload::Budgets::of(prof);
  auto gpu_kv = runtime::plan_for_executor(*model, prof, b, shape, 0);
  REQUIRE(gpu_kv.is_ok());
  CHECK_FALSE(gpu_kv->residency.any_kv_host());
  CHECK(gpu_kv->plan.usage.host_kv == 0);

  SECTION("--kv-host all: every full layer, no sliding one; the weights stay where they were") {
    auto all = runtime::plan_for_executor(*model, prof, b, shape, runtime::kAllKvLayers);
    INFO((all.is_ok() ? std::string() : all.message()));
    REQUIRE(all.is_ok());
    const auto& r = all->residency;
    REQUIRE(r.kv_host.size() == spec.hp.n_layer);
    for (uint32_t il = 0; il < spec.hp.n_layer; ++il) CHECK(r.kv_host[il] == (spec.window(il) == 0));
    CHECK(r.n_kv_host() == n_full);
    CHECK(all->plan.placement.attention == gpu_kv->plan.placement.attention);
    CHECK(all->plan.placement.ffn == gpu_kv->plan.placement.ffn);
    CHECK(all->plan.usage.host_kv > 0);
    CHECK(all->plan.usage.vram_kv + all->plan.usage.host_kv == gpu_kv->plan.usage.vram_kv);
  }
  SECTION("--kv-host 1: the deepest full layer") {
    auto one = runtime::plan_for_executor(*model, prof, b, shape, 1);
    REQUIRE(one.is_ok());
    const auto& r = one->residency;
    CHECK(r.n_kv_host() == 1);
    uint32_t deepest = 0;
    for (uint32_t il = 0; il < spec.hp.n_layer; ++il)
      if (spec.window(il) == 0) deepest = il;
    CHECK(r.kv_host[deepest]);
  }
  SECTION("--kv-host all beyond the host budget is an error naming the flag") {
    auto small = b;
    small.host = gpu_kv->plan.usage.host_total();  // no room for any KV beside the weights
    auto bad = runtime::plan_for_executor(*model, prof, small, shape, runtime::kAllKvLayers);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("--kv-host"));
  }
  SECTION("auto: KV that cannot fit in VRAM goes to host RAM") {
    const auto& u = gpu_kv->plan.usage;
    auto tight = b;
    // Everything but one full layer's KV.
    tight.vram = u.vram_total() - u.vram_kv / (2 * n_full);
    auto p = runtime::plan_for_executor(*model, prof, tight, shape, std::nullopt);
    INFO((p.is_ok() ? std::string() : p.message()));
    REQUIRE(p.is_ok());
    CHECK(p->plan.usage.vram_total() <= tight.vram);
    // Either some KV moved to the host or weights left VRAM for it; both are the planner's call,
    // and the residency must say the same as the plan.
    for (uint32_t il = 0; il < spec.hp.n_layer; ++il)
      CHECK(p->residency.kv_host[il] == (p->plan.placement.kv[il] == KvTier::host));
  }
}
