// The placement report shared by `strata plan` (stdout) and `strata generate` (stderr, before it
// starts; issue 5). One function builds the planner's inputs, one prints the report, so both
// commands show the same thing for the same inputs.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "offload/planner.h"
#include "offload/executor_plan.h"
#include "session/default_spec.h"
#include "session/session.h"

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

// The speculation of a run that left --spec unset (session/default_spec.h): under --vram from the
// executor plan; otherwise for `profile` (the report's), or for --profile / this machine
// (profile_or_detected(profile_path, use_gpu)) when the caller made no report.
Result<session::DefaultSpec> default_speculation(const session::Session& s,
                                                 const std::optional<offload::HardwareProfile>& profile,
                                                 const std::string& profile_path, bool use_gpu,
                                                 const offload::RunShape& shape);

// The shape a run without a budget is reported with: the engine's context, n_prompt and n_gen
// tokens, the session's --spec and KV types. The session has an engine.
offload::RunShape report_shape(const session::Session& s, uint64_t n_prompt, uint64_t n_gen);

// A running session's placement as JSON (schema strata.plan/1, as `strata plan --json` writes it),
// for serve's GET /v1/strata/plan. Under --vram: the plan the engine runs ("applied": true).
// Without a budget: the plan for `profile` with its whole memory and shape `r`, what the report
// before `strata generate` shows ("applied": false: the engine keeps every weight where --device
// puts it); an infeasible one is {"feasible": false, "reason"}, as `plan --json` writes it.
nlohmann::json session_plan_json(const session::Session& s, const offload::HardwareProfile& profile,
                                 const offload::RunShape& r);
// The plan document of a run that has no plan: {"feasible": false, "reason": why}.
nlohmann::json infeasible_plan_json(const std::string& why);

}  // namespace strata::cli
