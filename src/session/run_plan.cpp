#include "session/run_plan.h"

#include <algorithm>

#include "core/units.h"
#include "offload/default_profile.h"

namespace strata::session {

void apply_speculation(const spec::SpecConfig& sc, offload::RunShape& shape) {
  const bool prefix = sc.mode == spec::SpecMode::early || sc.mode == spec::SpecMode::automatic;
  shape.draft_depth = prefix ? sc.depth : 0;
  shape.draft_len = sc.draft_max;
}

Result<offload::ExecutorPlan> plan_run(const runtime::Model& model, PlanInputs in,
                                       const std::optional<spec::SpecConfig>& sc) {
  if (sc) apply_speculation(*sc, in.shape);
  // The only call of the executor's planner: when it moves (offload/), this line follows it.
  return offload::plan_with_cpu_tier(in.cpu_blocks, model.file, model.spec, in.profile, in.budgets, in.shape,
                                     in.kv_host_layers);
}

Result<PlanInputs> budget_inputs(const RunOptions& o, const runtime::ForwardOptions& fo,
                                 const offload::HardwareProfile* profile) {
  PlanInputs in;
  auto cpu_blocks = o.cpu_blocks_mode();
  if (!cpu_blocks) return cpu_blocks.status();
  in.cpu_blocks = *cpu_blocks;
  if (profile) {
    in.profile = *profile;
  } else if (!o.profile.empty()) {
    auto p = offload::load_profile(o.profile);
    if (!p) return p.status();
    in.profile = std::move(p.value());
  } else {
    // The CPU's rates matter only where a block may go to the cpu tier.
    in.profile = offload::detected_profile(true, in.cpu_blocks != offload::CpuBlocks::off);
  }
  offload::Budgets& b = in.budgets;
  b = offload::Budgets::of(in.profile);
  auto v = parse_bytes(o.vram);
  if (!v) return Status::error("--vram: {}", v.message());
  b.vram = *v;
  if (!o.pinned.empty()) {
    auto p = parse_bytes(o.pinned);
    if (!p) return Status::error("--pinned: {}", p.message());
    b.pinned = *p;
    b.host = std::max(b.host, b.pinned);
  }
  offload::RunShape& r = in.shape;
  r.ctx = fo.n_ctx;
  r.kv = planner_kv_dtype(fo.k_type);
  if (fo.v_type != fo.k_type) r.kv_v = planner_kv_dtype(fo.v_type);
  r.prefill_chunk = fo.ubatch;
  r.decode_rows = std::max<uint32_t>(fo.n_seq, 1);  // the sessions that step together (batch, serve)
  r.cpu_int8 = fo.cpu_int8;  // the CUDA engine's cpu-tier blocks run the int8 kernels then (HostCompute)
  r.prefetch_depth = o.prefetch;
  r.require_draft_resident = o.require_draft_resident;
  static_assert(offload::kPrefillGroupAuto == 0xffffffffu, "RunOptions::prefill_group's default says auto");
  r.prefill_group_reserve = o.prefill_group;
  auto kv_host = o.kv_host_layers();
  if (!kv_host) return kv_host.status();
  in.kv_host_layers = *kv_host;
  return in;
}

}  // namespace strata::session
