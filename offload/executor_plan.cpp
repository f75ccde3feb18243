#include "offload/executor_plan.h"

#include <algorithm>

#include "core/units.h"

namespace strata::offload {

void place_kv_host(const ModelBlocks& blocks, uint32_t n, Placement& placement) {
  placement.kv.assign(blocks.n_layer, KvTier::gpu);
  for (uint32_t il = blocks.n_layer; il-- > 0 && n > 0;) {
    if (il < blocks.swa.size() && blocks.swa[il]) continue;
    placement.kv[il] = KvTier::host;
    --n;
  }
}

Result<ExecutorPlan> plan_for_executor(const gguf::File& file, const model::ModelSpec& spec, HardwareProfile profile,
                                       Budgets budgets, RunShape shape, std::optional<uint32_t> kv_host_layers) {
  ExecutorPlan e;
  auto blocks = model_blocks(file, spec);
  if (!blocks) return blocks.status();
  e.blocks = std::move(blocks.value());
  // An explicit KV split: plan the weights with every KV in VRAM, then move the KV (below).
  if (kv_host_layers) budgets.allow_host_kv = false;
  auto p = plan(e.blocks, profile, budgets, shape);
  if (!p) return p.status();
  e.plan = std::move(p.value());
  if (kv_host_layers && *kv_host_layers > 0) {
    budgets.allow_host_kv = true;
    place_kv_host(e.blocks, *kv_host_layers, e.plan.placement);
    if (!evaluate(e.blocks, profile, budgets, shape, e.plan))
      return Status::error("--kv-host: full-attention KV in host RAM needs {} of host RAM beside the weights; the "
                           "budget is {}",
                           format_bytes(e.plan.usage.host_kv), format_bytes(budgets.host));
  }
  const uint64_t context = profile.cuda_context.bytes;
  if (budgets.vram <= context)
    return Status::error("--vram {} leaves nothing beside the CUDA context ({})", format_bytes(budgets.vram),
                         format_bytes(context));
  STRATA_TRY(e.plan.placement.check(e.blocks.n_layer));
  e.engine_vram_budget = budgets.vram - context;
  e.pinned_budget = budgets.pinned;
  e.ring_slots = std::max<uint32_t>(2, e.plan.ring_slots);
  e.profile = std::move(profile);
  e.budgets = budgets;
  e.shape = shape;
  return e;
}

}  // namespace strata::offload
