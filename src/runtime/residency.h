// From a placement plan (offload/planner.h) to the CUDA engine's Residency, and the planning call
// the programs make when the user gives a VRAM budget (`--vram 12GiB`).
//
// The executor runs the `gpu` and `stream` tiers today; `disk`, `cpu` and host-side KV are planned
// out (Budgets::allow_*) rather than silently approximated, so the prediction printed is the plan
// that runs.
#pragma once

#include <string>

#include "core/status.h"
#include "offload/hardware_profile.h"
#include "offload/model_blocks.h"
#include "offload/planner.h"
#include "runtime/engine.h"
#include "runtime/model.h"

namespace strata::runtime {

struct ExecutorPlan {
  offload::ModelBlocks blocks;
  offload::HardwareProfile profile;
  offload::Budgets budgets;
  offload::RunShape shape;
  offload::Plan plan;
  Residency residency;
};

// Plans `model` under `budgets` for the tiers the executor runs. The engine's arena gets the VRAM
// budget minus the profile's CUDA context (the driver's share of a real card of that size).
Result<ExecutorPlan> plan_for_executor(const Model& model, offload::HardwareProfile profile, offload::Budgets budgets,
                                       offload::RunShape shape);

// Error when the plan uses a tier the executor does not run.
Result<Residency> residency_from_plan(const offload::Plan& plan, uint64_t vram_budget, uint64_t pinned_budget);

}  // namespace strata::runtime
