#include "cli/placement_report.h"

#include <chrono>

#include "offload/default_profile.h"

namespace strata::cli {

Result<offload::HardwareProfile> profile_or_detected(const std::string& path, bool use_gpu) {
  if (!path.empty()) return offload::load_profile(path);
  return offload::detected_profile(use_gpu);
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

}  // namespace strata::cli
