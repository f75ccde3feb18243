#include "offload/executor_plan.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

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

Result<CpuBlocks> cpu_blocks_from_name(const std::string& name) {
  if (name == "off") return CpuBlocks::off;
  if (name == "on") return CpuBlocks::on;
  if (name == "auto") return CpuBlocks::automatic;
  return Status::error("--cpu-blocks: '{}' is not auto, on or off", name);
}

const char* cpu_blocks_name(CpuBlocks c) {
  switch (c) {
    case CpuBlocks::off: return "off";
    case CpuBlocks::on: return "on";
    case CpuBlocks::automatic: return "auto";
  }
  return "?";
}

namespace {

// "6 FFN blocks (1.21 GiB)", "4 FFN + 2 attention blocks and the head (...)"; empty: none on the CPU.
std::string cpu_blocks_text(const ModelBlocks& m, const Placement& pl) {
  uint32_t n_ffn = 0, n_attn = 0;
  uint64_t bytes = 0;
  for (uint32_t il = 0; il < m.n_layer; ++il) {
    if (pl.tier(model::Block::ffn, il) == Tier::cpu) ++n_ffn, bytes += m.ffn[il].bytes;
    if (pl.tier(model::Block::attention, il) == Tier::cpu) ++n_attn, bytes += m.attention[il].bytes;
  }
  const bool head = pl.head == Tier::cpu;
  if (head) bytes += m.head.bytes;
  if (n_ffn + n_attn == 0 && !head) return {};
  std::vector<std::string> parts;
  if (n_ffn) parts.push_back(fmt::format("{} FFN", n_ffn));
  if (n_attn) parts.push_back(fmt::format("{} attention", n_attn));
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? " + " : "") + parts[i];
  if (n_ffn + n_attn) s += n_ffn + n_attn == 1 ? " block" : " blocks";
  if (head) s += s.empty() ? "the head" : " and the head";
  return fmt::format("{} ({})", s, format_bytes(bytes));
}

bool all_resident(const Placement& pl) { return !pl.any_streamed() && !pl.any(Tier::cpu); }

}  // namespace

Result<ExecutorPlan> plan_with_cpu_tier(CpuBlocks mode, const gguf::File& file, const model::ModelSpec& spec,
                                        const HardwareProfile& profile, const Budgets& budgets,
                                        const RunShape& shape, std::optional<uint32_t> kv_host_layers) {
  auto plan_allowing = [&](bool allow_cpu) {
    Budgets b = budgets;
    b.allow_cpu = allow_cpu;
    return plan_for_executor(file, spec, profile, b, shape, kv_host_layers);
  };
  if (mode == CpuBlocks::off) return plan_allowing(false);
  auto with = plan_allowing(true);
  if (mode == CpuBlocks::on) {
    if (!with) return with;
    const std::string what = cpu_blocks_text(with->blocks, with->plan.placement);
    if (!what.empty())
      with->plan.cpu_tier_choice = fmt::format("{} computed on the CPU (--cpu-blocks on)", what);
    else if (!all_resident(with->plan.placement))
      with->plan.cpu_tier_choice = "none (--cpu-blocks on, but the planner computes no block on the CPU)";
    return with;
  }
  auto without = plan_allowing(false);
  if (!with) return without ? std::move(without) : std::move(with);
  const std::string what = cpu_blocks_text(with->blocks, with->plan.placement);
  if (!without) {
    if (!what.empty())
      with->plan.cpu_tier_choice =
          fmt::format("{} computed on the CPU (auto: without the cpu tier the model does not fit the budgets)", what);
    return with;
  }
  const double tps_with = with->plan.prediction.objective_tps(), tps_without = without->plan.prediction.objective_tps();
  const int pct = int(kCpuTierMinGain * 100 + 0.5);
  if (!what.empty() && tps_with >= tps_without * (1 + kCpuTierMinGain)) {
    with->plan.cpu_tier_choice = fmt::format("{} computed on the CPU (auto: predicted {:.2f} vs {:.2f} tok/s without)",
                                             what, tps_with, tps_without);
    return with;
  }
  if (!what.empty())
    without->plan.cpu_tier_choice =
        fmt::format("off (auto: no predicted gain of {}%: {:.2f} tok/s with {} on the CPU vs {:.2f} without)", pct,
                    tps_with, what, tps_without);
  else if (!all_resident(without->plan.placement))
    without->plan.cpu_tier_choice = "off (auto: no block is predicted faster computed on the CPU than streamed)";
  return without;
}

}  // namespace strata::offload
