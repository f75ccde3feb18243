#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <optional>
#include <cstdio>
#include <filesystem>

#include "core/rng.h"
#include "core/units.h"
#include "model/gguf_file.h"
#include "model/model_spec.h"
#include "model/synth.h"
#include "offload/executor_plan.h"
#include "offload/planner.h"
#include "offload/planner_fixtures.h"
#include "test_util.h"

using namespace strata;
using namespace strata::offload;
using namespace strata::offload::test_fixtures;

namespace {

// A random model: 1..n layers, random block sizes and types, sliding/full pattern.
ModelBlocks random_model(Rng& rng, uint32_t max_layers, uint32_t max_full) {
  ModelBlocks m;
  m.name = "random";
  m.arch = "test";
  m.n_layer = 1 + rng.next_u32() % max_layers;
  m.n_embd = 256 * (1 + rng.next_u32() % 8);
  m.n_ff = m.n_embd * 4;
  m.n_head = 8;
  m.n_head_kv = 1 + rng.next_u32() % 8;
  m.head_dim = 64 * (1 + rng.next_u32() % 2);
  m.n_vocab = 1000 + rng.next_u32() % 50000;
  const GgmlType types[] = {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0};
  auto block = [&](model::Block k, int layer) {
    WeightBlock b;
    b.kind = k;
    b.layer = layer;
    b.bytes = (1 + rng.next_u32() % 400) * kMiB;
    b.params = b.bytes * 2;
    b.bytes_by_type[types[rng.next_u32() % 4]] = b.bytes;
    return b;
  };
  const uint32_t pattern = 1 + rng.next_u32() % 4;
  uint32_t n_full = 0;
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    bool swa = pattern > 1 && il % pattern != pattern - 1;
    if (!swa && n_full >= max_full) swa = true;
    n_full += !swa;
    m.swa.push_back(swa);
    m.window.push_back(swa ? 512 : 0);
    m.attention.push_back(block(model::Block::attention, int(il)));
    m.ffn.push_back(block(model::Block::ffn, int(il)));
  }
  m.head = block(model::Block::head, -1);
  m.embedding = m.head;
  m.tied_head = true;
  return m;
}

HardwareProfile random_profile(Rng& rng, uint64_t model_bytes) {
  HardwareProfile p;
  p.name = "random";
  const auto ds = Provenance::datasheet("test");
  const bool gpu = rng.next_u32() % 8 != 0;
  p.vram_budget = {gpu ? uint64_t(rng.uniform(0.1f, 1.3f) * model_bytes) + kGiB / 2 : 0, ds};
  p.cuda_context = {gpu ? 300 * kMiB : 0, ds};
  p.host_ram = {uint64_t(rng.uniform(0.0f, 1.5f) * model_bytes), ds};
  p.pinned_budget = {uint64_t(rng.uniform(0.0f, 1.0f) * p.host_ram.bytes), ds};
  p.nvme_budget = {rng.next_u32() % 2 ? 2 * model_bytes : 0, ds};
  p.device_read_gbps = {gpu ? rng.uniform(200, 5000) : 0, ds};
  p.gpu_gemm_tflops = {gpu ? rng.uniform(20, 800) : 0, ds};
  if (gpu) p.h2d_pinned = {{kMiB, rng.uniform(5, 30), ds}, {8 * kMiB, rng.uniform(10, 55), ds}};
  p.nvme_read = {{1, rng.uniform(0.5f, 7.0f), ds}};
  p.host_read = {{1, rng.uniform(10, 120), ds}};
  // CPU GEMV slower than the device read: moving a block to VRAM never slows it down.
  const double cap = gpu ? p.device_read_gbps.value / 4 : 100;
  for (GgmlType t : {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0})
    p.cpu_gemv.push_back({t, std::min<double>(cap, rng.uniform(3, 40)), ds});
  return p;
}

RunShape random_shape(Rng& rng) {
  RunShape r;
  r.ctx = 1024 * (1 + rng.next_u32() % 64);
  r.gen = 128;
  r.kv = KvDtype(rng.next_u32() % 3);
  r.draft_depth = rng.next_u32() % 3;
  r.draft_len = 1 + rng.next_u32() % 6;
  r.acceptance = rng.uniform(0.3f, 0.9f);
  r.prefill_group_reserve = rng.next_u32() % 3 == 0 ? rng.next_u32() % 20 : 0;
  r.shared_ring = rng.next_u32() % 2 == 0;
  return r;
}

// Usage recomputed from the placement, independently of evaluate().
void check_budgets(const ModelBlocks& m, const HardwareProfile& p, const Budgets& b, const RunShape& r, const Plan& plan) {
  uint64_t vram = 0, pinned = 0, host = 0, disk = 0, max_nonres = 0;
  std::vector<uint64_t> streamed;  // a decode step's streamed blocks, in its order (layers, then the head)
  auto add = [&](const WeightBlock& w, Tier t) {
    if (t == Tier::gpu) vram += w.bytes; else max_nonres = std::max(max_nonres, w.bytes);
    if (t == Tier::stream || t == Tier::disk) streamed.push_back(w.bytes);
    if (t == Tier::stream) pinned += w.bytes;
    if (t == Tier::cpu) host += w.bytes;
    if (t == Tier::disk) disk += w.bytes;
  };
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    add(m.attention[il], plan.placement.attention[il]);
    add(m.ffn[il], plan.placement.ffn[il]);
    (plan.placement.kv[il] == KvTier::gpu ? vram : host) += m.kv_layer_bytes(il, r.ctx, r.kv, r.ring_margin());
  }
  add(m.head, plan.placement.head);
  if (p.has_gpu()) {
    // The ring: prefetch depth + 1 slots of the largest non-resident block, or a two-ended buffer
    // of the largest pair of streamed neighbours (shared_ring.h) where the run allows it and it is
    // smaller (the lone-block case included: a block's next use is its own).
    uint64_t ring = max_nonres * (max_nonres ? plan.prefetch_depth + 1 : 0);
    uint64_t pair = 0;
    for (size_t i = 0; i < streamed.size(); ++i) pair = std::max(pair, streamed[i] + streamed[(i + 1) % streamed.size()]);
    const bool shared = r.shared_ring && plan.prefetch_depth == 1 && disk == 0 && max_nonres &&
                        std::max(pair, max_nonres) < ring;
    CHECK(plan.ring_shared == shared);
    if (shared) ring = std::max(pair, max_nonres);
    CHECK(plan.usage.vram_staging == ring);
    vram += p.cuda_context.bytes + scratch_bytes(m, r) + ring;
    // Layer-major prefill: a group only where the executor runs one, its buffer inside the budget,
    // and the largest that fits (up to kMaxPrefillGroup and the prompt's chunks).
    const uint32_t g = plan.prefill_group;
    CHECK(g >= 1);
    if (layer_major_prefill(plan.placement))
      CHECK(g >= std::min<uint64_t>({r.prefill_group_reserve, kMaxPrefillGroup, prefill_chunks(r)}));
    CHECK(g <= std::min<uint64_t>(kMaxPrefillGroup, prefill_chunks(r)));
    CHECK(plan.prediction.prefill_group == g);
    if (g > 1) CHECK(layer_major_prefill(plan.placement));
    CHECK(plan.usage.vram_prefill_group == prefill_group_bytes(m, r, g));
    if (layer_major_prefill(plan.placement) && g < std::min<uint64_t>(kMaxPrefillGroup, prefill_chunks(r)))
      CHECK(vram + prefill_group_bytes(m, r, g + 1) > b.vram);
    vram += prefill_group_bytes(m, r, g);
    CHECK(vram <= b.vram);
  } else {
    CHECK(vram == 0);
  }
  CHECK(pinned <= b.pinned);
  CHECK(pinned + host <= b.host);
  CHECK(disk <= b.disk);
  CHECK(plan.usage.vram_total() <= std::max<uint64_t>(b.vram, p.has_gpu() ? 0 : plan.usage.vram_total()));
}

}  // namespace

TEST_CASE("model blocks: 27B header vs hand-computed sizes") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  CHECK(m->n_layer == 62);
  CHECK(m->full_layers().size() == 10);  // gemma3: every 6th layer is global
  model::SynthOptions o;
  o.preset = "27b";
  o.mix = "q3_k_m";
  REQUIRE(model::apply_preset(o).is_ok());
  auto row = [&](model::TensorRole role, int il, uint64_t n, uint64_t rows) {
    return ggml_row_bytes(model::synth_tensor_type(o, role, il), n) * rows;
  };
  using R = model::TensorRole;
  for (int il : {0, 5, 30, 61}) {
    // q [5376 -> 32*128], k, v [5376 -> 16*128], o [4096 -> 5376], 4 f32 norms.
    const uint64_t attn = row(R::attn_q, il, 5376, 4096) + row(R::attn_k, il, 5376, 2048) +
                          row(R::attn_v, il, 5376, 2048) + row(R::attn_output, il, 4096, 5376) +
                          4 * (5376 + 128 + 128 + 5376);
    const uint64_t ffn = row(R::ffn_gate, il, 5376, 21504) + row(R::ffn_up, il, 5376, 21504) +
                         row(R::ffn_down, il, 21504, 5376) + 4 * (5376 + 5376);
    INFO("layer " << il);
    CHECK(m->attention[il].bytes == attn);
    CHECK(m->ffn[il].bytes == ffn);
    CHECK(m->attention[il].params == 5376ull * 8192 + 4096ull * 5376 + 2 * 5376 + 256);
  }
  CHECK(m->tied_head);
  CHECK(m->head.bytes == row(R::token_embd, -1, 5376, 262144) + 4 * 5376);
  CHECK(m->kv_bytes_per_token(KvDtype::f16) == 2.0 * 16 * 128 * 2);   // 8 KiB per layer
  CHECK(m->kv_bytes_per_token(KvDtype::q8) == 2.0 * 16 * 128 * 34 / 32);
  CHECK(m->kv_bytes_per_token(KvDtype::q4) == 2.0 * 16 * 128 * 20 / 32);
  CHECK(m->kv_layer_bytes(5, 131072, KvDtype::q4, 4) == 131072ull * 2560);  // full layer
  CHECK(m->kv_layer_bytes(0, 131072, KvDtype::q4, 4) == (1024ull + 4) * 2560);  // ring: window + draft
  CHECK(m->kv_layer_bytes(0, 100, KvDtype::f16, 4) == 100ull * 8192);
}

TEST_CASE("planner: 27B on every shipped profile") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  for (const char* name : {"rtx3060-12g", "rtx4060ti-16g", "rtx4070-12g", "rtx3080-10g", "rtx4090-24g", "h200",
                           "h200-as-12g", "cpu-only"}) {
    const auto p = profile(name);
    RunShape r;
    r.ctx = 131072;
    r.kv = KvDtype::q4;
    r.draft_depth = 16;
    r.draft_len = 4;
    const auto t0 = std::chrono::steady_clock::now();
    auto plan_r = plan(*m, p, Budgets::of(p), r);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    INFO(name << ": " << (plan_r ? "" : plan_r.message()));
    REQUIRE(plan_r.is_ok());
    check_budgets(*m, p, Budgets::of(p), r, *plan_r);
    std::printf("27B q3_k_m @128K q4 KV on %-14s decode %6.2f tok/s, spec %6.2f tok/s, %s (planned in %.1f ms)\n", name,
                plan_r->prediction.decode_tps, plan_r->prediction.spec_tps,
                plan_r->prediction.step.bottleneck(p).c_str(), ms);
    // The draft path stays out of VRAM only where keeping it is predicted slower (planner.h,
    // "Draft path"; on the 12 GiB cards a plain-decoding plan beats every draft-resident one).
    if (p.has_gpu() && !plan_r->draft_resident) {
      RunShape hard = r;
      hard.require_draft_resident = true;
      auto forced = plan(*m, p, Budgets::of(p), hard);
      REQUIRE(forced.is_ok());
      CHECK(forced->draft_resident);
      CHECK(forced->prediction.objective_tps() < plan_r->prediction.objective_tps());
      std::printf("  draft path kept out of VRAM: %.2f tok/s vs %.2f with it resident\n",
                  plan_r->prediction.objective_tps(), forced->prediction.objective_tps());
    }
  }
}

TEST_CASE("planner: layer-major prefill groups on a streamed 27B plan") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  // The H200's compute with a link 1/8 of its PCIe (7 GB/s): a chunk's copies dominate its compute
  // (at the H200's own 55 GB/s the engine's measured GEMM rate makes prefill compute-bound, and a
  // group predicts about the same time); no cpu tier, as the CLI plans by default.
  auto p = profile("h200-as-12g");
  for (auto& pt : p.h2d_pinned) pt.gbps /= 8;
  RunShape r;
  r.ctx = 32768;
  r.prompt = 16384;
  r.kv = KvDtype::q4;
  Budgets b = Budgets::of(p);
  b.allow_cpu = false;
  b.allow_host_kv = false;
  for (auto [gib, reserve] : {std::pair{12u, 0u}, std::pair{12u, 16u}, std::pair{13u, 0u}, std::pair{13u, 8u}}) {
    b.vram = uint64_t(gib) * kGiB;
    r.prefill_group_reserve = reserve;
    auto res = plan(*m, p, b, r);
    INFO(gib << " GiB, reserve " << reserve << ": " << (res ? "" : res.message()));
    REQUIRE(res.is_ok());
    check_budgets(*m, p, b, r, *res);
    REQUIRE(res->placement.any_streamed());
    // Streamed bytes once per group: a group predicts a faster prefill than chunk by chunk, and the
    // h2d share of a group is the one of a chunk.
    const Prediction chunked = predict(*m, p, res->placement, r, 1);
    CHECK(res->prediction.prefill_tps >= chunked.prefill_tps);
    // At 12 GiB a chunk's copies outlast its compute: a group of 16 shares them (at 13 GiB so few
    // bytes stream that compute already dominates).
    if (gib == 12 && reserve == 16) CHECK(res->prediction.prefill_tps > 1.2 * chunked.prefill_tps);
    CHECK(res->prediction.decode_tps == chunked.decode_tps);  // decode is untouched
    if (reserve) CHECK(res->prefill_group >= reserve);
    std::printf("27B @%u GiB, 16K prompt, --prefill-group %u: group of %u chunks (%s), prefill %.0f tok/s vs %.0f "
                "chunk by chunk, decode %.2f tok/s, TTFT %.1f s\n", gib, reserve, res->prefill_group,
                format_bytes(res->usage.vram_prefill_group).c_str(), res->prediction.prefill_tps,
                chunked.prefill_tps, res->prediction.decode_tps, res->prediction.ttft_s);
  }
  // Everything resident: no group (nothing to share), no buffer, even when asked to reserve one.
  b.vram = 80 * kGiB;
  auto resident = plan(*m, p, b, r);
  REQUIRE(resident.is_ok());
  CHECK_FALSE(resident->placement.any_streamed());
  CHECK(resident->prefill_group == 1);
  CHECK(resident->usage.vram_prefill_group == 0);
  // A group never exceeds the prompt's chunks.
  b.vram = 12 * kGiB;
  r.prompt = 1000;
  r.prefill_group_reserve = 16;
  auto short_prompt = plan(*m, p, b, r);
  REQUIRE(short_prompt.is_ok());
  CHECK(short_prompt->prefill_group <= 2);
}

TEST_CASE("planner: 27B at 12 GiB / 128K / INT4 KV is feasible and at 8 GiB without host RAM it is not") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  const auto p = profile("rtx3060-12g");
  RunShape r;
  r.ctx = 131072;
  r.kv = KvDtype::q4;
  Budgets b = Budgets::of(p);
  b.vram = 12 * kGiB;
  auto ok = plan(*m, p, b, r);
  INFO((ok ? "" : ok.message()));
  REQUIRE(ok.is_ok());
  CHECK(ok->usage.vram_total() <= 12 * kGiB);
  b.vram = 8 * kGiB;
  b.pinned = b.host = 0;
  auto bad = plan(*m, p, b, r);
  REQUIRE_FALSE(bad.is_ok());
  INFO(bad.message());
  CHECK(bad.message().find("does not fit") != std::string::npos);
  CHECK(bad.message().find("short by") != std::string::npos);
  CHECK(bad.message().find("pinned") != std::string::npos);
  std::printf("8 GiB, no host RAM: %s\n", bad.message().c_str());
}

// The 27B at 12 GiB on the rtx3060 profile, 4K context, speculating with the draft path (head and
// layers [0, 16)) kept resident: a plan that streams FFN blocks.
struct SpecPlan12g {
  HardwareProfile p = profile("rtx3060-12g");
  RunShape r;
  Budgets b;
  SpecPlan12g() {
    r.ctx = 4096;
    r.draft_depth = 16;
    r.require_draft_resident = true;
    r.shared_ring = false;  // two slots of the largest block (the cases that want the shared ring say so)
    b = Budgets::of(p);
    b.vram = 12 * kGiB;
  }
};

TEST_CASE("planner: the staging ring is a double buffer for pinned blocks, deeper with disk reads") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  // With the draft path resident, streamed FFN blocks make each slot ~142 MiB.
  SpecPlan12g s;
  const auto& p = s.p;
  const RunShape& r = s.r;
  Budgets b = s.b;
  auto pinned_only = plan(*m, p, b, r);
  REQUIRE(pinned_only.is_ok());
  REQUIRE(pinned_only->usage.pinned_weights > 0);
  REQUIRE(pinned_only->usage.disk == 0);
  CHECK(pinned_only->prefetch_depth == 1);
  CHECK(pinned_only->ring_slots == 2);
  CHECK(pinned_only->usage.vram_staging == 2 * pinned_only->ring_slot_bytes);
  CHECK(pinned_only->ring_slot_bytes > 100 * kMiB);
  // The slot the auto depth saves goes to weights: fewer bytes stream than at depth 2.
  RunShape r2 = r;
  r2.prefetch_depth = 2;
  auto deep = plan(*m, p, b, r2);
  REQUIRE(deep.is_ok());
  CHECK(deep->ring_slots == 3);
  CHECK(pinned_only->usage.vram_weights > deep->usage.vram_weights);
  CHECK(pinned_only->prediction.decode_tps >= deep->prediction.decode_tps);
  // Too little pinned RAM for the streamed blocks: some are read from disk, and the ring is deeper.
  b.pinned = 512 * kMiB;
  auto disk = plan(*m, p, b, r);
  INFO((disk ? "" : disk.message()));
  REQUIRE(disk.is_ok());
  REQUIRE(disk->usage.disk > 0);
  CHECK(disk->prefetch_depth == 2);
  CHECK(disk->ring_slots == 3);
  CHECK(disk->usage.vram_total() <= b.vram);
}

TEST_CASE("planner: a two-ended ring holds the largest pair of streamed neighbours, and the VRAM it saves holds weights") {
  CHECK(shared_ring_bytes(std::vector<uint64_t>{}) == 0);
  CHECK(shared_ring_bytes(std::vector<uint64_t>{7}) == 14);  // a lone block's next use is its own
  CHECK(shared_ring_bytes(std::vector<uint64_t>{33, 142, 33, 33}) == 175);
  CHECK(shared_ring_bytes(std::vector<uint64_t>{142, 33, 33, 142}) == 284);  // the last block's neighbour is the first
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  // The speculative plan at 12 GiB streams FFN blocks (the draft path keeps the early ones), so two
  // fixed slots are two FFN blocks.
  SpecPlan12g s;
  RunShape r = s.r;
  auto slots = plan(*m, s.p, s.b, r);
  r.shared_ring = true;
  auto shared = plan(*m, s.p, s.b, r);
  REQUIRE(slots.is_ok());
  REQUIRE(shared.is_ok());
  CHECK(!slots->ring_shared);
  CHECK(slots->usage.vram_staging == 2 * slots->ring_slot_bytes);
  CHECK(shared->ring_shared);
  CHECK(shared->ring_slots == 2);
  std::vector<uint64_t> order;  // the decode step's streamed blocks in its order
  for (uint32_t il = 0; il < m->n_layer; ++il) {
    if (shared->placement.attention[il] == Tier::stream) order.push_back(m->attention[il].bytes);
    if (shared->placement.ffn[il] == Tier::stream) order.push_back(m->ffn[il].bytes);
  }
  if (shared->placement.head == Tier::stream) order.push_back(m->head.bytes);
  REQUIRE(order.size() >= 4);
  CHECK(shared->usage.vram_staging == std::max(shared->ring_slot_bytes, shared_ring_bytes(order)));
  CHECK(shared->usage.vram_staging < 2 * shared->ring_slot_bytes);
  CHECK(shared->usage.vram_staging < slots->usage.vram_staging - 64 * kMiB);
  // What the ring no longer takes holds weights: fewer bytes stream, the step is predicted faster,
  // the draft path stays resident, and the budget holds.
  CHECK(shared->usage.vram_weights > slots->usage.vram_weights);
  CHECK(shared->usage.pinned_weights < slots->usage.pinned_weights);
  CHECK(shared->prediction.decode_tps > slots->prediction.decode_tps);
  CHECK(shared->draft_resident);
  CHECK(shared->usage.vram_total() <= s.b.vram);
  // The JSON says which ring.
  CHECK(plan_json(*m, s.p, s.b, r, *shared)["staging"]["ring_shared"] == true);
  // Disk reads keep a deeper ring of fixed slots.
  Budgets b = s.b;
  b.pinned = 512 * kMiB;
  auto disk = plan(*m, s.p, b, r);
  REQUIRE(disk.is_ok());
  REQUIRE(disk->usage.disk > 0);
  CHECK(!disk->ring_shared);
  CHECK(disk->ring_slots == 3);
}

TEST_CASE("planner: a speculative plan spreads its streamed blocks over the layers after the draft path") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  const SpecPlan12g s12;
  const auto& p = s12.p;
  const RunShape& r = s12.r;
  const Budgets& b = s12.b;
  // The streamed layers (either block) of a plan, in layer order.
  auto streamed = [&](const Plan& pl) {
    std::vector<uint32_t> out;
    for (uint32_t il = 0; il < m->n_layer; ++il)
      if (pl.placement.attention[il] == Tier::stream || pl.placement.ffn[il] == Tier::stream) out.push_back(il);
    return out;
  };
  auto spread = plan(*m, p, b, r);
  REQUIRE(spread.is_ok());
  CHECK(spread->draft_resident);
  const auto s = streamed(*spread);
  REQUIRE(s.size() >= 8);
  const uint32_t rest = m->n_layer - r.draft_depth;
  // Spread: streamed layers start near the draft path's end and reach the last quarter, with
  // resident layers between them (no run of more than two streamed layers in a row).
  CHECK(s.front() >= r.draft_depth);
  CHECK(s.front() < r.draft_depth + rest / 4);
  CHECK(s.back() >= m->n_layer - rest / 4);
  uint32_t run = 1, longest = 1;
  for (size_t i = 1; i < s.size(); ++i) longest = std::max(longest, run = s[i] == s[i - 1] + 1 ? run + 1 : 1);
  CHECK(longest <= 2);
  // Layer order (the policy off, and plain decoding): the deepest layers stream, one run at the end.
  RunShape ordered = r;
  ordered.spread_streamed = false;
  auto deep = plan(*m, p, b, ordered);
  REQUIRE(deep.is_ok());
  const auto d = streamed(*deep);
  REQUIRE(!d.empty());
  CHECK(d.back() == m->n_layer - 1);
  CHECK(d.size() == d.back() - d.front() + 1);
  RunShape plain = ordered;
  plain.draft_depth = 0;
  plain.spread_streamed = true;
  auto plain_plan = plan(*m, p, b, plain);
  REQUIRE(plain_plan.is_ok());
  const auto pp = streamed(*plain_plan);
  REQUIRE(!pp.empty());
  CHECK(pp.size() == pp.back() - pp.front() + 1);
  // Same bytes to stream either way (the order moves which blocks, not how many bytes fit).
  CHECK(std::abs(double(spread->usage.pinned_weights) - double(deep->usage.pinned_weights)) <
        0.1 * double(deep->usage.pinned_weights));
}

TEST_CASE("planner properties over random models and profiles") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  int feasible = 0, infeasible = 0, draft_fits = 0, draft_not_worth_it = 0, hard_rule_slower = 0;
  for (int iter = 0; iter < 300; ++iter) {
    INFO("iteration " << iter);
    const ModelBlocks m = random_model(rng, 24, 6);
    const HardwareProfile p = random_profile(rng, m.weight_bytes());
    const RunShape r = random_shape(rng);
    const Budgets b = Budgets::of(p);
    auto res = plan(m, p, b, r);
    if (!res) {
      ++infeasible;
      CHECK(res.message().find("does not fit") != std::string::npos);
      CHECK(res.message().find("smallest changes") != std::string::npos);
      continue;
    }
    ++feasible;
    check_budgets(m, p, b, r, *res);
    // Determinism.
    auto again = plan(m, p, b, r);
    REQUIRE(again.is_ok());
    CHECK(again->prediction.objective_tps() == res->prediction.objective_tps());
    // More VRAM never predicts slower (and stays feasible).
    if (p.has_gpu()) {
      Budgets more = b;
      more.vram += (1 + rng.next_u32() % 2048) * kMiB;
      auto bigger = plan(m, p, more, r);
      REQUIRE(bigger.is_ok());
      CHECK(bigger->prediction.objective_tps() >= res->prediction.objective_tps() * (1 - 1e-9));
      // The hard draft rule (planner.h, "Draft path") is monotone only within one regime (draft
      // path resident in both plans, or in neither); at the switch the bigger plan keeps it resident.
      RunShape hard = r;
      hard.require_draft_resident = true;
      auto h_small = plan(m, p, b, hard), h_big = plan(m, p, more, hard);
      REQUIRE(h_small.is_ok());
      REQUIRE(h_big.is_ok());
      if (h_big->draft_resident == h_small->draft_resident)
        CHECK(h_big->prediction.objective_tps() >= h_small->prediction.objective_tps() * (1 - 1e-9));
      else
        CHECK(h_big->draft_resident);
      if (h_big->prediction.objective_tps() < h_small->prediction.objective_tps() * (1 - 1e-9)) ++hard_rule_slower;
    }
    // The draft path is resident whenever it fits and that is not slower: where all of VRAM beyond
    // the draft path, the ring, scratch, context and all KV suffices for the rest of the plan, either
    // the plan keeps the draft path resident, or the best plan that must keep it is slower.
    if (r.speculative() && p.has_gpu()) {
      uint64_t draft = m.head.bytes, max_block = 0, kv = 0;
      for (uint32_t il = 0; il < m.n_layer; ++il) {
        if (il < r.draft_depth) draft += m.attention[il].bytes + m.ffn[il].bytes;
        max_block = std::max({max_block, m.attention[il].bytes, m.ffn[il].bytes});
        kv += m.kv_layer_bytes(il, r.ctx, r.kv, r.ring_margin());
      }
      const uint64_t ring = max_block * (prefetch_depth_for(r.prefetch_depth, false) + 1);
      const uint64_t need = draft + kv + ring + scratch_bytes(m, r) + p.cuda_context.bytes;
      if (need <= b.vram && b.pinned >= m.weight_bytes()) {
        ++draft_fits;
        if (!res->draft_resident) {
          RunShape hard = r;
          hard.require_draft_resident = true;
          auto forced = plan(m, p, b, hard);
          REQUIRE(forced.is_ok());
          CHECK(forced->draft_resident);
          CHECK(forced->prediction.objective_tps() < res->prediction.objective_tps());
          ++draft_not_worth_it;
        }
      }
    }
  }
  std::printf("draft path fits in %d instances, kept out of VRAM as slower in %d; the hard draft rule predicted "
              "slower with more VRAM in %d\n", draft_fits, draft_not_worth_it, hard_rule_slower);
  std::printf("random instances: %d feasible, %d infeasible\n", feasible, infeasible);
  CHECK(feasible > 0);
}

TEST_CASE("planner: optimal vs brute force on small instances") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  double worst_search_gap = 0;
  int compared = 0;
  for (int iter = 0; iter < 60; ++iter) {
    INFO("iteration " << iter);
    const ModelBlocks m = random_model(rng, 2, 2);
    const HardwareProfile p = random_profile(rng, m.weight_bytes());
    const RunShape r = random_shape(rng);
    const Budgets b = Budgets::of(p);
    // Brute force: every tier for every block, every KV tier for every full layer.
    const auto full = m.full_layers();
    const bool gpu = p.has_gpu();
    const int nt = gpu ? 4 : 1, nb = 1 + 2 * int(m.n_layer);
    uint64_t combos = 1;
    for (int i = 0; i < nb; ++i) combos *= nt;
    double best_any = -1, best_draft = -1;
    Plan cand;
    for (uint64_t kc = 0; kc < (gpu ? 1ull << full.size() : 1); ++kc)
      for (uint64_t c = 0; c < combos; ++c) {
        Placement& pl = cand.placement;
        pl.attention.assign(m.n_layer, Tier::cpu);
        pl.ffn.assign(m.n_layer, Tier::cpu);
        pl.kv.assign(m.n_layer, gpu ? KvTier::gpu : KvTier::host);
        for (size_t j = 0; j < full.size(); ++j)
          if (!gpu || (kc >> j) & 1) pl.kv[full[j]] = KvTier::host;
        uint64_t x = c;
        auto next = [&] { Tier t = gpu ? Tier(x % 4) : Tier::cpu; x /= nt; return t; };
        pl.head = next();
        for (uint32_t il = 0; il < m.n_layer; ++il) { pl.attention[il] = next(); pl.ffn[il] = next(); }
        if (!evaluate(m, p, b, r, cand)) continue;
        const double t = cand.prediction.objective_tps();
        best_any = std::max(best_any, t);
        if (cand.draft_resident) best_draft = std::max(best_draft, t);
      }
    auto res = plan(m, p, b, r);
    if (best_any < 0) {
      CHECK_FALSE(res.is_ok());
      continue;
    }
    REQUIRE(res.is_ok());
    // The best plan; with the draft path resident when that is as fast (planner.h, "Draft path").
    CHECK(res->prediction.objective_tps() == Approx(best_any).epsilon(1e-12));
    if (best_draft >= best_any * (1 - 1e-12)) CHECK(res->draft_resident);
    // The hard rule: the best draft-resident plan whenever there is one.
    RunShape hard = r;
    hard.require_draft_resident = true;
    auto h = plan(m, p, b, hard);
    REQUIRE(h.is_ok());
    CHECK(h->prediction.objective_tps() == Approx(best_draft >= 0 ? best_draft : best_any).epsilon(1e-12));
    CHECK(h->draft_resident == (best_draft >= 0));
    const double best = best_any;
    auto s = solve_search(m, p, b, r);
    if (s) {
      worst_search_gap = std::max(worst_search_gap, 1 - s->prediction.objective_tps() / best);
      ++compared;
    }
  }
  std::printf("structured search vs brute force: worst gap %.1f%% over %d instances\n", 100 * worst_search_gap, compared);
}

TEST_CASE("planner: --prefill-group auto reserves the group with the shortest predicted job") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  // A link slow enough (7 GB/s) that a long prompt's copies matter against its compute.
  auto p = profile("h200-as-12g");
  for (auto& pt : p.h2d_pinned) pt.gbps /= 8;
  Budgets b = Budgets::of(p);
  b.vram = 12 * kGiB;
  b.allow_cpu = false;
  b.allow_host_kv = false;
  RunShape r;
  r.ctx = 131072;
  r.prompt = 130000;
  r.kv = KvDtype::q4;
  auto job_s = [&](const Plan& pl) { return pl.prediction.ttft_s + double(r.gen) / pl.prediction.objective_tps(); };
  for (const uint64_t gen : {256ull, 200000ull}) {
    r.gen = gen;
    r.prefill_group_reserve = kPrefillGroupAuto;
    auto chosen = plan(*m, p, b, r);
    REQUIRE(chosen.is_ok());
    RunShape no_reserve = r;  // auto promises no reserve; the group still obeys the budgets
    no_reserve.prefill_group_reserve = 0;
    check_budgets(*m, p, b, no_reserve, *chosen);
    CHECK_FALSE(chosen->prefill_group_choice.empty());
    // No fixed reserve the auto rule compares gives a shorter predicted job.
    double best = 1e300;
    for (const uint32_t g : {0u, 4u, 8u, 16u, kMaxPrefillGroup}) {
      r.prefill_group_reserve = g;
      auto fixed = plan(*m, p, b, r);
      REQUIRE(fixed.is_ok());
      best = std::min(best, job_s(*fixed));
      CHECK(job_s(*chosen) <= job_s(*fixed) * (1 + 1e-12));
    }
    CHECK(job_s(*chosen) == Approx(best));
    INFO(chosen->prefill_group_choice);
    if (gen == 256) {
      // A long document with a short answer: a reserved group (streamed blocks once per group).
      CHECK(chosen->usage.vram_prefill_group >= prefill_group_bytes(*m, r, 4));
      CHECK(chosen->prefill_group_choice.find("reserved") == 0);
    } else {
      // A long generation keeps the VRAM for weights: decode dominates the job.
      CHECK(chosen->prefill_group_choice.find("none reserved") == 0);
    }
  }
}

TEST_CASE("planner: resident prefill predicts the measured gain of larger chunks", "[planner]") {
  auto m = model_blocks_from_path(header_27b());
  REQUIRE(m.is_ok());
  auto p = profile("h200-as-12g");
  RunShape r;
  r.ctx = 8192;
  r.prompt = 4096;
  r.kv = KvDtype::f16;
  Budgets b = Budgets::of(p);
  b.vram = 100 * kGiB;  // everything resident
  b.allow_cpu = false;
  std::vector<double> tps;
  for (uint32_t chunk : {512u, 1024u, 2048u, 4096u}) {
    r.prefill_chunk = chunk;
    auto res = plan(*m, p, b, r);
    REQUIRE(res.is_ok());
    REQUIRE_FALSE(res->placement.any_streamed());
    tps.push_back(res->prediction.prefill_tps);
  }
  // Matmuls at 40% of the GEMM ceiling with 512-token chunks and 64% at 4096 (measured): the
  // prediction grows with the chunk, by about that ratio end to end (attention is ~2% of a 4K prompt).
  for (size_t i = 1; i < tps.size(); ++i) CHECK(tps[i] > tps[i - 1]);
  CHECK(tps.back() / tps.front() == Approx(0.64 / 0.40).epsilon(0.12));
}

// RunShape::cpu_int8: cpu-tier weight blocks cost bytes / cpu_gemv_q8(type, b) where the profile
// measured the type, b x bytes / cpu_gemv(type) otherwise.
TEST_CASE("cost model: cpu-tier blocks at the int8 GEMV rate when the run uses it") {
  Rng rng(5);
  const ModelBlocks m = random_model(rng, 3, 1);
  HardwareProfile p = profile("cpu-only");
  const auto ds = Provenance::datasheet("test");
  for (GgmlType t : {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0})
    p.cpu_gemv_q8.insert(p.cpu_gemv_q8.end(), {{t, 8, 1, 40, ds}, {t, 8, 8, 20, ds}});
  Placement pl;
  pl.attention.assign(m.n_layer, Tier::cpu);
  pl.ffn.assign(m.n_layer, Tier::cpu);
  pl.kv.assign(m.n_layer, KvTier::host);
  pl.head = Tier::cpu;
  RunShape r;
  double bytes = 0, f32_8 = 0;
  auto add = [&](const WeightBlock& b) {
    bytes += double(b.bytes);
    f32_8 += 8 * double(b.bytes) / (p.cpu_gemv_gbps(b.main_type()) * 1e9);
  };
  for (uint32_t il = 0; il < m.n_layer; ++il) add(m.attention[il]), add(m.ffn[il]);
  add(m.head);
  // Host work: 4 per attention block (Q, K, V, output), 1 per FFN block and the head, 1 per
  // host-KV attention.
  const double trips = (4.0 * m.n_layer + m.n_layer + 1) * 20e-6 + m.n_layer * 20e-6;
  // pos 0: no KV to read, so cpu_s is the weights plus the round trips.
  const auto exact8 = sweep_cost(m, p, pl, r, 0, m.n_layer, true, 8, 0, false);
  CHECK(exact8.cpu_s == Approx(f32_8 + trips));
  r.cpu_int8 = true;
  const auto q1 = sweep_cost(m, p, pl, r, 0, m.n_layer, true, 1, 0, false);
  const auto q8 = sweep_cost(m, p, pl, r, 0, m.n_layer, true, 8, 0, false);
  CHECK(q1.cpu_s == Approx(bytes / 40e9 + trips));
  CHECK(q8.cpu_s == Approx(bytes / 20e9 + trips));
}

// Host RAM is one bus for the copy engine and the CPU: a step that streams blocks and computes
// others on the CPU reads both from it, so a slow host bounds the step even where PCIe and the CPU
// each keep up.
TEST_CASE("cost model: streamed and cpu-tier bytes share the host's read rate") {
  Rng rng(7);
  const ModelBlocks m = random_model(rng, 4, 1);
  HardwareProfile p = profile("rtx3060-12g");
  Placement pl;
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    pl.attention.push_back(il % 2 ? Tier::stream : Tier::gpu);
    pl.ffn.push_back(il % 2 ? Tier::cpu : Tier::gpu);
  }
  pl.kv.assign(m.n_layer, KvTier::gpu);
  pl.head = Tier::gpu;
  RunShape r;
  r.cpu_int8 = true;
  const auto c = sweep_cost(m, p, pl, r, 0, m.n_layer, true, 1, 0, false);
  REQUIRE(c.cpu_bytes > 0);
  REQUIRE(c.h2d_bytes > 0);
  CHECK(c.host_s == Approx(double(c.h2d_bytes + c.cpu_bytes) / (p.host_gbps() * 1e9)));
  CHECK(c.total_s() >= c.host_s);
  // Copies and CPU blocks overlap in part: the shorter side shows by kCpuOverlapLoss.
  REQUIRE(kCpuOverlapLoss > 0);
  CHECK(c.total_s() ==
        Approx(std::max({c.h2d_s, c.gpu_s + c.cpu_s, c.host_s}) + kCpuOverlapLoss * std::min(c.h2d_s, c.cpu_s)));
  // A host that reads at a tenth of the rate: host RAM is the bottleneck, and the report says so.
  for (auto& pt : p.host_read) pt.gbps /= 10;
  const auto slow = sweep_cost(m, p, pl, r, 0, m.n_layer, true, 1, 0, false);
  CHECK(slow.total_s() == Approx(slow.host_s + kCpuOverlapLoss * std::min(slow.h2d_s, slow.cpu_s)));
  CHECK(slow.host_s > std::max({slow.h2d_s, slow.gpu_s + slow.cpu_s}));
  CHECK_THAT(slow.bottleneck(p), Catch::StartsWith("host RAM"));
  // Nothing on the CPU: the copy engine alone, bounded by PCIe.
  for (auto& t : pl.ffn) t = t == Tier::cpu ? Tier::stream : t;
  const auto streamed = sweep_cost(m, p, pl, r, 0, m.n_layer, true, 1, 0, false);
  CHECK(streamed.host_s == 0);
  CHECK(streamed.total_s() == Approx(std::max(streamed.h2d_s, streamed.gpu_s)));  // no CPU work: no overlap loss
}

namespace {

struct Header27b {
  gguf::File file;
  model::ModelSpec spec;
};

const Header27b& model_27b() {
  static const Header27b m = [] {
    auto f = gguf::File::open(header_27b(), {.require_data = false});
    REQUIRE(f.is_ok());
    auto s = model::spec_from_gguf(*f);
    REQUIRE(s.is_ok());
    return Header27b{std::move(f.value()), std::move(s.value())};
  }();
  return m;
}

// A 12 GiB card whose PCIe copies run at h2d_gbps and whose CPU computes every listed type at
// cpu_gbps (int8 activations: 1 column; half that for 8; f32 activations alike), so that only
// these two rates decide between streaming a block and computing it on the CPU.
HardwareProfile cpu_vs_pcie(double cpu_gbps, double h2d_gbps) {
  HardwareProfile p = profile("rtx3060-12g");
  const auto ds = Provenance::datasheet("test");
  p.h2d_pinned = {{kMiB, h2d_gbps, ds}, {64 * kMiB, h2d_gbps, ds}};
  p.cpu_gemv.clear();
  p.cpu_gemv_q8.clear();
  for (GgmlType t : {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16,
                     GgmlType::F32}) {
    p.cpu_gemv.push_back({t, cpu_gbps, ds});
    p.cpu_gemv_q8.insert(p.cpu_gemv_q8.end(), {{t, 8, 1, cpu_gbps, ds}, {t, 8, 8, cpu_gbps / 2, ds}});
  }
  return p;
}

bool any_cpu(const ExecutorPlan& e) { return e.plan.placement.any(Tier::cpu); }

}  // namespace

// --cpu-blocks: off never computes a block on the CPU; on lets the planner; auto plans both ways and
// keeps the cpu-tier plan only where it is predicted kCpuTierMinGain faster (offload/executor_plan.h).
TEST_CASE("planner: --cpu-blocks auto takes the cpu tier where the CPU is fast and PCIe slow, not where the CPU is slow") {
  const auto& m = model_27b();
  RunShape r;
  r.ctx = 4096;
  r.cpu_int8 = true;
  auto plan_as = [&](CpuBlocks mode, const HardwareProfile& p) {
    Budgets b = Budgets::of(p);
    b.allow_host_kv = false;  // weight blocks only: the KV stays in VRAM
    auto e = plan_with_cpu_tier(mode, m.file, m.spec, p, b, r);
    INFO((e ? std::string() : e.message()));
    REQUIRE(e.is_ok());
    return std::move(e.value());
  };
  {  // A CPU at 60 GB/s beside a PCIe link at 6: computing blocks where they lie wins by far.
    const auto p = cpu_vs_pcie(60, 6);
    const auto off = plan_as(CpuBlocks::off, p), on = plan_as(CpuBlocks::on, p), au = plan_as(CpuBlocks::automatic, p);
    CHECK_FALSE(any_cpu(off));
    CHECK(off.plan.cpu_tier_choice.empty());
    REQUIRE(any_cpu(au));
    CHECK(au.plan.placement.ffn == on.plan.placement.ffn);
    CHECK(au.plan.placement.attention == on.plan.placement.attention);
    CHECK(au.plan.prediction.objective_tps() >= (1 + kCpuTierMinGain) * off.plan.prediction.objective_tps());
    CHECK_THAT(au.plan.cpu_tier_choice, Catch::Contains("computed on the CPU (auto: predicted"));
    CHECK_THAT(on.plan.cpu_tier_choice, Catch::Contains("computed on the CPU (--cpu-blocks on)"));
    // The decision is in the report and the JSON.
    CHECK_THAT(plan_report(au.blocks, au.profile, au.budgets, au.shape, au.plan),
               Catch::Contains("cpu tier:  " + au.plan.cpu_tier_choice + "\n"));
    CHECK(plan_json(au.blocks, au.profile, au.budgets, au.shape, au.plan)["cpu_tier_choice"] == au.plan.cpu_tier_choice);
  }
  {  // A CPU at 1 GB/s beside a PCIe link at 25: nothing goes to the CPU.
    const auto p = cpu_vs_pcie(1, 25);
    const auto off = plan_as(CpuBlocks::off, p), au = plan_as(CpuBlocks::automatic, p);
    REQUIRE(off.plan.placement.any_streamed());  // there is a choice to make
    CHECK_FALSE(any_cpu(au));
    CHECK(au.plan.placement.ffn == off.plan.placement.ffn);
    CHECK(au.plan.placement.attention == off.plan.placement.attention);
    CHECK(au.plan.prediction.objective_tps() == Approx(off.plan.prediction.objective_tps()));
    CHECK_THAT(au.plan.cpu_tier_choice, Catch::StartsWith("off (auto: "));
  }
  {  // Everything resident: nothing to decide, and nothing said.
    const auto p = cpu_vs_pcie(60, 6);
    Budgets b = Budgets::of(p);
    b.vram = 40 * kGiB;
    auto e = plan_with_cpu_tier(CpuBlocks::automatic, m.file, m.spec, p, b, r);
    REQUIRE(e.is_ok());
    CHECK_FALSE(any_cpu(*e));
    CHECK_FALSE(e->plan.placement.any_streamed());
    CHECK(e->plan.cpu_tier_choice.empty());
  }
  CHECK(cpu_blocks_from_name("auto").value() == CpuBlocks::automatic);
  CHECK(cpu_blocks_from_name("on").value() == CpuBlocks::on);
  CHECK(cpu_blocks_from_name("off").value() == CpuBlocks::off);
  CHECK_THAT(cpu_blocks_from_name("yes").message(), Catch::Contains("--cpu-blocks: 'yes' is not auto, on or off"));
}

// A batch or a server steps several sequences together (RunShape::decode_rows): a cpu-tier block
// computes each of their columns on the CPU, a streamed one crosses PCIe once for all of them, so
// the CPU that wins for one sequence can lose for eight, and auto (the default) must see that.
TEST_CASE("planner: --cpu-blocks auto plans for the sequences that decode together") {
  const auto& m = model_27b();
  // 1 column: the CPU (14 GB/s) beats PCIe (10); 8 columns take it 4x as long (3.5 GB/s of weights).
  HardwareProfile p = cpu_vs_pcie(14, 10);
  for (auto& q : p.cpu_gemv_q8)
    if (q.cols == 8) q.gbps = 14.0 / 4;
  auto plan_rows = [&](uint32_t rows) {
    RunShape r;
    r.ctx = 4096;
    r.cpu_int8 = true;
    r.decode_rows = rows;
    Budgets b = Budgets::of(p);
    b.allow_host_kv = false;
    auto e = plan_with_cpu_tier(CpuBlocks::automatic, m.file, m.spec, p, b, r);
    INFO((e ? std::string() : e.message()));
    REQUIRE(e.is_ok());
    return std::move(e.value());
  };
  const auto one = plan_rows(1), eight = plan_rows(8);
  INFO("1 row: " << one.plan.cpu_tier_choice << " | 8 rows: " << eight.plan.cpu_tier_choice);
  REQUIRE(any_cpu(one));
  CHECK_FALSE(any_cpu(eight));
  CHECK_THAT(eight.plan.cpu_tier_choice, Catch::StartsWith("off (auto: "));
  // decode_tps is the aggregate over the rows: the 8-row plan's, priced at 8 rows, beats the 1-row
  // plan's placement priced at 8 rows.
  RunShape r8 = eight.shape;
  const double as_planned = eight.plan.prediction.decode_tps;
  const double other = predict(eight.blocks, p, one.plan.placement, r8, 1).decode_tps;
  CHECK(as_planned > other);
  CHECK(eight.plan.prediction.decode_tps > one.plan.prediction.decode_tps);  // 8 sequences at once
}

// Between a CPU too slow to help and one fast enough, the cpu-tier plan's predicted gain grows from
// nothing: auto takes it at kCpuTierMinGain and not below, where `on` already would.
TEST_CASE("planner: --cpu-blocks auto keeps a plan only marginally faster with the cpu tier off") {
  const auto& m = model_27b();
  RunShape r;
  r.ctx = 4096;
  r.cpu_int8 = true;
  struct Point { double gain; bool on_cpu, auto_cpu; std::string why; };
  auto at = [&](double cpu_gbps) {
    const auto p = cpu_vs_pcie(cpu_gbps, 6);
    Budgets b = Budgets::of(p);
    b.allow_host_kv = false;
    auto off = plan_with_cpu_tier(CpuBlocks::off, m.file, m.spec, p, b, r);
    auto on = plan_with_cpu_tier(CpuBlocks::on, m.file, m.spec, p, b, r);
    auto au = plan_with_cpu_tier(CpuBlocks::automatic, m.file, m.spec, p, b, r);
    REQUIRE((off && on && au));
    const Point pt{on->plan.prediction.objective_tps() / off->plan.prediction.objective_tps(), any_cpu(*on),
                   any_cpu(*au), au->plan.cpu_tier_choice};
    INFO("CPU at " << cpu_gbps << " GB/s: gain " << pt.gain << ", " << pt.why);
    CHECK(pt.auto_cpu == (pt.on_cpu && pt.gain >= 1 + kCpuTierMinGain));
    return pt;
  };
  double lo = 0.01, hi = 60;
  REQUIRE_FALSE(at(lo).auto_cpu);
  REQUIRE(at(hi).auto_cpu);
  // Bisect towards the rate where the gain reaches the margin; just below it, `on` computes blocks
  // on the CPU for a gain under the margin.
  std::optional<Point> marginal;
  for (int i = 0; i < 40 && !marginal; ++i) {
    const double mid = std::sqrt(lo * hi);
    const Point pt = at(mid);
    if (pt.on_cpu && pt.gain > 1 && pt.gain < 1 + kCpuTierMinGain) marginal = pt;
    else (pt.gain >= 1 + kCpuTierMinGain ? hi : lo) = mid;
  }
  REQUIRE(marginal);
  CHECK_FALSE(marginal->auto_cpu);
  CHECK_THAT(marginal->why, Catch::StartsWith("off (auto: no predicted gain of 5%: "));
}
