// The placement report shared by `strata plan` (stdout) and `strata generate` (stderr, before it
// starts; issue 5). One function builds the planner's inputs, one prints the report, so both
// commands show the same thing for the same inputs.
#pragma once

#include <cstdio>
#include <string>

#include "core/status.h"
#include "offload/planner.h"
#include "offload/executor_plan.h"

namespace strata::cli {

struct PlanInputs {
  offload::ModelBlocks blocks;
  offload::HardwareProfile profile;
  offload::Budgets budgets;
  offload::RunShape run;
};

// The profile from --profile, or, when none is given, the detected one (offload/default_profile.h;
// `use_gpu` false for --device cpu).
Result<offload::HardwareProfile> profile_or_detected(const std::string& path, bool use_gpu);

// Plans and writes the report to `out`. Returns the plan, or the planner's reason it is infeasible
// (written nowhere: the caller decides whether that is fatal).
Result<offload::Plan> print_placement_report(const PlanInputs& in, std::FILE* out);
// Writes the report of a plan made elsewhere (session::plan_run) and how long planning took.
void print_plan_report(const offload::ExecutorPlan& e, double planning_ms, std::FILE* out);

}  // namespace strata::cli
