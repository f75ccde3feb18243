#include "runtime/residency.h"

#include <algorithm>

#include "core/units.h"

namespace strata::runtime {

Result<Residency> residency_from_plan(const offload::Plan& plan, uint64_t vram_budget, uint64_t pinned_budget) {
  const auto& pl = plan.placement;
  if (pl.ffn.size() != pl.attention.size() || (!pl.kv.empty() && pl.kv.size() != pl.attention.size()))
    return Status::error("plan has {} attention, {} ffn and {} KV entries: one per layer expected", pl.attention.size(),
                         pl.ffn.size(), pl.kv.size());
  Residency r;
  r.vram_budget = vram_budget;
  r.pinned_budget = pinned_budget;
  r.ring_slots = std::max<uint32_t>(2, plan.ring_slots);
  // gpu: resident; stream: pinned RAM -> VRAM ring; disk: model file -> bounce -> VRAM ring;
  // cpu: host RAM, computed there.
  auto streamed = [](offload::Tier t) { return t == offload::Tier::stream || t == offload::Tier::disk; };
  for (size_t il = 0; il < pl.attention.size(); ++il) {
    r.attention_streamed.push_back(streamed(pl.attention[il]));
    r.ffn_streamed.push_back(streamed(pl.ffn[il]));
    r.attention_disk.push_back(pl.attention[il] == offload::Tier::disk);
    r.ffn_disk.push_back(pl.ffn[il] == offload::Tier::disk);
    r.attention_cpu.push_back(pl.attention[il] == offload::Tier::cpu);
    r.ffn_cpu.push_back(pl.ffn[il] == offload::Tier::cpu);
  }
  for (auto t : pl.kv) r.kv_host.push_back(t == offload::KvTier::host);
  r.head_streamed = streamed(pl.head);
  r.head_disk = pl.head == offload::Tier::disk;
  r.head_cpu = pl.head == offload::Tier::cpu;
  return r;
}

void place_kv_host(const offload::ModelBlocks& blocks, uint32_t n, offload::Placement& placement) {
  placement.kv.assign(blocks.n_layer, offload::KvTier::gpu);
  for (uint32_t il = blocks.n_layer; il-- > 0 && n > 0;) {
    if (il < blocks.swa.size() && blocks.swa[il]) continue;
    placement.kv[il] = offload::KvTier::host;
    --n;
  }
}

Result<ExecutorPlan> plan_for_executor(const Model& model, offload::HardwareProfile profile, offload::Budgets budgets,
                                       offload::RunShape shape, std::optional<uint32_t> kv_host_layers) {
  ExecutorPlan e;
  auto blocks = offload::model_blocks(model.file, model.spec);
  if (!blocks) return blocks.status();
  e.blocks = std::move(blocks.value());
  // An explicit KV split: plan the weights with every KV in VRAM, then move the KV (below).
  if (kv_host_layers) budgets.allow_host_kv = false;
  auto plan = offload::plan(e.blocks, profile, budgets, shape);
  if (!plan) return plan.status();
  e.plan = std::move(plan.value());
  if (kv_host_layers && *kv_host_layers > 0) {
    budgets.allow_host_kv = true;
    place_kv_host(e.blocks, *kv_host_layers, e.plan.placement);
    if (!offload::evaluate(e.blocks, profile, budgets, shape, e.plan))
      return Status::error("--kv-host: full-attention KV in host RAM needs {} of host RAM beside the weights; the "
                           "budget is {}",
                           format_bytes(e.plan.usage.host_kv), format_bytes(budgets.host));
  }
  const uint64_t context = profile.cuda_context.bytes;
  if (budgets.vram <= context)
    return Status::error("--vram {} leaves nothing beside the CUDA context ({})", format_bytes(budgets.vram),
                         format_bytes(context));
  auto res = residency_from_plan(e.plan, budgets.vram - context, budgets.pinned);
  if (!res) return res.status();
  e.residency = std::move(res.value());
  e.profile = std::move(profile);
  e.budgets = budgets;
  e.shape = shape;
  return e;
}

}  // namespace strata::runtime
