// The executor's half of a plan: the Placement the engine runs (offload/placement.h, handed over by
// runtime::use_plan), and plan_for_executor producing plans with cpu blocks and host KV when VRAM
// and pinned RAM are tiny (and refusing them when the caller does not allow them). CPU only: plans
// are pure data; the GPU tests (tests/gpu/test_host_tiers.cpp) run them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "offload/hardware_profile.h"
#include "offload/executor_plan.h"
#include "runtime/engine.h"
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

TEST_CASE("A placement answers per block and layer, and use_plan hands it to the engine as planned", "[executor]") {
  offload::ExecutorPlan e;
  auto& pl = e.plan.placement;
  pl.attention = {Tier::gpu, Tier::stream, Tier::disk, Tier::cpu};
  pl.ffn = {Tier::cpu, Tier::gpu, Tier::stream, Tier::disk};
  pl.head = Tier::cpu;
  pl.kv = {KvTier::gpu, KvTier::host, KvTier::gpu, KvTier::host};
  CHECK(pl.tier(model::Block::attention, 2) == Tier::disk);
  CHECK(pl.tier(model::Block::ffn, 0) == Tier::cpu);
  CHECK(pl.tier(model::Block::head, 0) == Tier::cpu);
  CHECK(pl.tier(model::Block::embedding, 0) == Tier::gpu);
  CHECK(pl.kv_tier(1) == KvTier::host);
  CHECK(pl.n_kv_host() == 2);
  CHECK(pl.any(Tier::cpu));
  CHECK(pl.any_kv_host());
  CHECK(pl.any_streamed());
  CHECK(pl.check(4).is_ok());
  e.engine_vram_budget = 1000;
  e.pinned_budget = 2000;
  e.ring_slots = 3;
  runtime::ForwardOptions fo;
  runtime::use_plan(e, fo);
  CHECK(fo.placement.attention == pl.attention);
  CHECK(fo.placement.ffn == pl.ffn);
  CHECK(fo.placement.kv == pl.kv);
  CHECK(fo.placement.head == Tier::cpu);
  CHECK(fo.ring_slots == 3);
  CHECK(fo.vram_budget == 1000);
  CHECK(fo.pinned_budget == 2000);

  SECTION("a placement without host tiers has none") {
    pl.attention.assign(4, Tier::gpu);
    pl.ffn.assign(4, Tier::stream);
    pl.head = Tier::gpu;
    pl.kv.assign(4, KvTier::gpu);
    CHECK_FALSE(pl.any(Tier::cpu));
    CHECK_FALSE(pl.any_kv_host());
    CHECK(pl.any_streamed());
  }
  SECTION("an empty placement is everything in VRAM") {
    const offload::Placement all_gpu;
    CHECK(all_gpu.tier(model::Block::ffn, 7) == Tier::gpu);
    CHECK(all_gpu.kv_tier(7) == KvTier::gpu);
    CHECK_FALSE(all_gpu.any_streamed());
    CHECK(all_gpu.check(12).is_ok());
  }
  SECTION("a ragged placement is an error") {
    pl.ffn.pop_back();
    auto bad = pl.check(4);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("one per layer"));
  }
}

TEST_CASE("place_kv_host moves the deepest full-attention layers only", "[executor]") {
  offload::ModelBlocks m;
  m.n_layer = 6;
  m.swa = {true, true, false, true, true, false};
  offload::Placement pl;
  offload::place_kv_host(m, 1, pl);
  CHECK(pl.kv == std::vector<KvTier>{KvTier::gpu, KvTier::gpu, KvTier::gpu, KvTier::gpu, KvTier::gpu, KvTier::host});
  offload::place_kv_host(m, offload::kAllKvLayers, pl);
  CHECK(pl.kv == std::vector<KvTier>{KvTier::gpu, KvTier::gpu, KvTier::host, KvTier::gpu, KvTier::gpu, KvTier::host});
  offload::place_kv_host(m, 0, pl);
  CHECK(std::count(pl.kv.begin(), pl.kv.end(), KvTier::host) == 0);
}

TEST_CASE("plan_for_executor puts blocks on the cpu tier when VRAM and pinned RAM are tiny", "[executor]") {
  for (const char* dir : {"llama", "gemma3-swa"}) {
    INFO(dir);
    auto model = load(dir);
    auto prof = profile("rtx3060-12g");
    offload::RunShape shape;
    shape.ctx = 256;
    shape.gen = 32;
    shape.prefill_chunk = 16;
    offload::Budgets roomy = offload::Budgets::of(prof);
    auto big = offload::plan_for_executor(model->file, model->spec, prof, roomy, shape, 0);
    INFO((big.is_ok() ? std::string() : big.message()));
    REQUIRE(big.is_ok());
    CHECK_FALSE(big->plan.placement.any(Tier::cpu));  // everything fits: nothing goes to the host
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
    auto p = offload::plan_for_executor(model->file, model->spec, prof, tiny, shape, 0);
    INFO((p.is_ok() ? std::string() : p.message()));
    REQUIRE(p.is_ok());
    const auto& pl = p->plan.placement;
    CHECK(pl.any(Tier::cpu));
    CHECK(pl.check(bl.n_layer).is_ok());
    CHECK(p->plan.usage.host_cpu_weights > 0);
    CHECK(p->plan.usage.vram_total() <= tiny.vram);
    CHECK(p->engine_vram_budget == tiny.vram - prof.cuda_context.bytes);
    CHECK(p->pinned_budget == tiny.pinned);

    // The same budgets without the cpu tier: nothing fits.
    tiny.allow_cpu = false;
    auto none = offload::plan_for_executor(model->file, model->spec, prof, tiny, shape, 0);
    CHECK_FALSE(none.is_ok());
  }
}

TEST_CASE("plan_for_executor places full-attention KV in host RAM", "[executor]") {
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
  auto gpu_kv = offload::plan_for_executor(model->file, model->spec, prof, b, shape, 0);
  REQUIRE(gpu_kv.is_ok());
  CHECK_FALSE(gpu_kv->plan.placement.any_kv_host());
  CHECK(gpu_kv->plan.usage.host_kv == 0);

  SECTION("--kv-host all: every full layer, no sliding one; the weights stay where they were") {
    auto all = offload::plan_for_executor(model->file, model->spec, prof, b, shape, offload::kAllKvLayers);
    INFO((all.is_ok() ? std::string() : all.message()));
    REQUIRE(all.is_ok());
    const auto& r = all->plan.placement;
    REQUIRE(r.kv.size() == spec.hp.n_layer);
    for (uint32_t il = 0; il < spec.hp.n_layer; ++il) CHECK((r.kv[il] == KvTier::host) == (spec.window(il) == 0));
    CHECK(r.n_kv_host() == n_full);
    CHECK(all->plan.placement.attention == gpu_kv->plan.placement.attention);
    CHECK(all->plan.placement.ffn == gpu_kv->plan.placement.ffn);
    CHECK(all->plan.usage.host_kv > 0);
    CHECK(all->plan.usage.vram_kv + all->plan.usage.host_kv == gpu_kv->plan.usage.vram_kv);
  }
  SECTION("--kv-host 1: the deepest full layer") {
    auto one = offload::plan_for_executor(model->file, model->spec, prof, b, shape, 1);
    REQUIRE(one.is_ok());
    const auto& r = one->plan.placement;
    CHECK(r.n_kv_host() == 1);
    uint32_t deepest = 0;
    for (uint32_t il = 0; il < spec.hp.n_layer; ++il)
      if (spec.window(il) == 0) deepest = il;
    CHECK(r.kv[deepest] == KvTier::host);
  }
  SECTION("--kv-host all beyond the host budget is an error naming the flag") {
    auto small = b;
    small.host = gpu_kv->plan.usage.host_total();  // no room for any KV beside the weights
    auto bad = offload::plan_for_executor(model->file, model->spec, prof, small, shape, offload::kAllKvLayers);
    REQUIRE_FALSE(bad.is_ok());
    CHECK_THAT(bad.message(), Catch::Contains("--kv-host"));
  }
  SECTION("auto: KV that cannot fit in VRAM goes to host RAM") {
    const auto& u = gpu_kv->plan.usage;
    auto tight = b;
    // Everything but one full layer's KV.
    tight.vram = u.vram_total() - u.vram_kv / (2 * n_full);
    auto p = offload::plan_for_executor(model->file, model->spec, prof, tight, shape, std::nullopt);
    INFO((p.is_ok() ? std::string() : p.message()));
    REQUIRE(p.is_ok());
    CHECK(p->plan.usage.vram_total() <= tight.vram);
    // Either some KV moved to the host or weights left VRAM for it; both are the planner's call.
    // Sliding layers' rings stay in VRAM either way.
    for (uint32_t il = 0; il < spec.hp.n_layer; ++il)
      if (spec.window(il) != 0) CHECK(p->plan.placement.kv[il] == KvTier::gpu);
  }
}
