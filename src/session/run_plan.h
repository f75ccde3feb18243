// From a run's options to a placement: the one planning function that `strata plan` and every
// command that runs a model under a budget call (generate, bench, batch, stress), so that the
// same flags give the same plan. Speculation is part of the run shape: the planner keeps the draft
// path (head + layers [0, d)) resident when its cost model predicts that faster.
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "offload/hardware_profile.h"
#include "offload/planner.h"
#include "runtime/engine.h"
#include "runtime/model.h"
#include "offload/executor_plan.h"
#include "session/run_options.h"
#include "spec/spec_config.h"

namespace strata::session {

// What a plan depends on besides the model.
struct PlanInputs {
  offload::HardwareProfile profile;
  offload::Budgets budgets;
  offload::RunShape shape;
  std::optional<uint32_t> kv_host_layers;  // nullopt: the planner decides (offload/executor_plan.h)
  // --cpu-blocks: budgets.allow_cpu is set from it (offload::plan_with_cpu_tier).
  offload::CpuBlocks cpu_blocks = offload::CpuBlocks::automatic;
};

// The planner's view of --spec / --draft-max. The cost model knows one kind of drafter, a prefix of
// the layers: early exit drafts with layers [0, depth); auto drafts with the same fixed depth
// (its early-exit drafter's; auto also tries lookup and subset, which the cost model cannot
// represent, so the plan is the early-exit one). Lookup drafts without running layers and subset
// skips middle layers (no prefix): both plan as plain decoding (draft_depth 0). draft_len is
// --draft-max; the acceptance stays the shape's assumption (RunShape::acceptance, 0.6 unless the
// caller sets it).
void apply_speculation(const spec::SpecConfig& sc, offload::RunShape& shape);

// The one planning call: `sc` (when given) into the shape, then the executor's planner with the cpu
// tier as in.cpu_blocks says (offload::plan_with_cpu_tier: with auto, planned with and without it;
// Plan::cpu_tier_choice says which was taken and why). The model may be header-only
// (Session::open_header): only its file header and spec are read.
Result<offload::ExecutorPlan> plan_run(const runtime::Model& model, PlanInputs in,
                                       const std::optional<spec::SpecConfig>& sc);

// The inputs a run under --vram plans with: the profile (--profile, or this machine's detected
// GPU, whose CPU rates are measured at start-up unless --cpu-blocks off), budgets (--vram,
// --pinned), --cpu-blocks, the shape (context, KV types, prefill chunk, prefetch depth, the CPU's
// int8 matmuls as fo.cpu_int8 says; prompt and generation lengths left at the planner's defaults),
// --kv-host. Errors name the flag.
// profile: use this one instead of loading --profile or probing the machine (a second plan of the
// same run, to be comparable with the first and to skip a second probe).
Result<PlanInputs> budget_inputs(const RunOptions& o, const runtime::ForwardOptions& fo,
                                 const offload::HardwareProfile* profile = nullptr);

}  // namespace strata::session
