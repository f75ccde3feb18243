#include "runtime/residency.h"

#include <algorithm>

#include "core/units.h"

namespace strata::runtime {

Result<Residency> residency_from_plan(const offload::Plan& plan, uint64_t vram_budget, uint64_t pinned_budget) {
  const auto& pl = plan.placement;
  Residency r;
  r.vram_budget = vram_budget;
  r.pinned_budget = pinned_budget;
  r.ring_slots = std::max<uint32_t>(2, plan.ring_slots);
  // gpu: resident; stream: pinned RAM -> VRAM ring; disk: model file -> bounce -> VRAM ring.
  auto streamed = [](offload::Tier t, const std::string& what) -> Result<bool> {
    if (t == offload::Tier::gpu) return false;
    if (t == offload::Tier::stream || t == offload::Tier::disk) return true;
    return Status::error("the plan puts {} on the {} tier, which the executor does not run yet", what,
                         offload::tier_name(t));
  };
  for (size_t il = 0; il < pl.attention.size(); ++il) {
    auto a = streamed(pl.attention[il], "attn " + std::to_string(il));
    if (!a) return a.status();
    auto f = streamed(pl.ffn[il], "ffn " + std::to_string(il));
    if (!f) return f.status();
    r.attention_streamed.push_back(*a);
    r.ffn_streamed.push_back(*f);
    r.attention_disk.push_back(pl.attention[il] == offload::Tier::disk);
    r.ffn_disk.push_back(pl.ffn[il] == offload::Tier::disk);
  }
  for (size_t il = 0; il < pl.kv.size(); ++il)
    if (pl.kv[il] != offload::KvTier::gpu)
      return Status::error("the plan puts layer {}'s KV in host RAM, which the executor does not run yet", il);
  auto h = streamed(pl.head, "the head");
  if (!h) return h.status();
  r.head_streamed = *h;
  r.head_disk = pl.head == offload::Tier::disk;
  return r;
}

Result<ExecutorPlan> plan_for_executor(const Model& model, offload::HardwareProfile profile, offload::Budgets budgets,
                                       offload::RunShape shape) {
  ExecutorPlan e;
  auto blocks = offload::model_blocks(model.file, model.spec);
  if (!blocks) return blocks.status();
  e.blocks = std::move(blocks.value());
  budgets.allow_cpu = budgets.allow_host_kv = false;  // tiers the executor does not run yet
  auto plan = offload::plan(e.blocks, profile, budgets, shape);
  if (!plan) return plan.status();
  e.plan = std::move(plan.value());
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
