#include "cli/placement_report.h"

#include <chrono>

#include "offload/default_profile.h"
#include "session/run_plan.h"

namespace strata::cli {

Result<offload::HardwareProfile> profile_or_detected(const std::string& path, bool use_gpu) {
  if (!path.empty()) return offload::load_profile(path);
  // No budget here: nothing the CPU's rates would decide (detected_profile's cpu_rates).
  return offload::detected_profile(use_gpu, false);
}

Result<offload::Plan> print_placement_report(const PlanInputs& in, std::FILE* out) {
  const auto t0 = std::chrono::steady_clock::now();
  auto p = offload::plan(in.blocks, in.profile, in.budgets, in.run);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!p) return p;
  const std::string text = offload::plan_report(in.blocks, in.profile, in.budgets, in.run, *p);
  std::fprintf(out, "%splanned in %.1f ms\n", text.c_str(), ms);
  std::fflush(out);
  return p;
}

void print_plan_report(const offload::ExecutorPlan& e, double planning_ms, std::FILE* out) {
  const std::string text = offload::plan_report(e.blocks, e.profile, e.budgets, e.shape, e.plan);
  std::fprintf(out, "%splanned in %.1f ms\n", text.c_str(), planning_ms);
  std::fflush(out);
}

offload::RunShape report_shape(const session::Session& s, uint64_t n_prompt, uint64_t n_gen) {
  offload::RunShape r;
  r.ctx = s.engine().n_ctx();
  r.prompt = n_prompt;
  r.gen = n_gen;
  session::apply_speculation(s.spec(), r);
  if (auto kv = s.options().kv_types()) {
    r.kv = session::planner_kv_dtype(kv->first);
    if (kv->second != kv->first) r.kv_v = session::planner_kv_dtype(kv->second);
  }
  return r;
}

nlohmann::json infeasible_plan_json(const std::string& why) {
  return nlohmann::json{{"schema", "strata.plan/1"}, {"feasible", false}, {"reason", why}, {"applied", false}};
}

nlohmann::json session_plan_json(const session::Session& s, const offload::HardwareProfile& profile,
                                 const offload::RunShape& r) {
  nlohmann::json j;
  if (const auto& e = s.executor_plan()) {
    j = offload::plan_json(e->blocks, e->profile, e->budgets, e->shape, e->plan);
    j["applied"] = true;
  } else {
    auto blocks = offload::model_blocks(s.model().file, s.model().spec);
    if (!blocks) return infeasible_plan_json(blocks.message());
    const offload::Budgets b = offload::Budgets::of(profile);
    auto p = offload::plan(*blocks, profile, b, r);
    if (!p) return infeasible_plan_json(p.message());
    j = offload::plan_json(*blocks, profile, b, r, *p);
    j["applied"] = false;
  }
  j["feasible"] = true;
  return j;
}

Result<session::DefaultSpec> default_speculation(const session::Session& s,
                                                 const std::optional<offload::HardwareProfile>& profile,
                                                 const std::string& profile_path, bool use_gpu,
                                                 const offload::RunShape& shape) {
  if (profile || s.executor_plan()) return session::default_spec(s, profile ? *profile : offload::HardwareProfile{}, shape);
  auto p = profile_or_detected(profile_path, use_gpu);
  if (!p) return p.status();
  return session::default_spec(s, *p, shape);
}

}  // namespace strata::cli
