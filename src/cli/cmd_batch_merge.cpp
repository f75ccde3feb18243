// strata batch-merge: shard results files -> one results file, checking that every job id of the
// jobs file is present exactly once (see batch/merge.h). Exit 0 merged, 1 a check failed.
#include <memory>

#include "batch/job.h"
#include "batch/merge.h"
#include "cli/command.h"
#include "core/log.h"

namespace strata::cli {
namespace {

struct MergeArgs {
  std::string jobs, output;
  std::vector<std::string> inputs;
};

int run_merge(const MergeArgs& a) {
  auto jobs = batch::load_jobs(a.jobs, {});
  if (!jobs) {
    log::error("{}", jobs.message());
    return 2;
  }
  for (const auto& in : a.inputs)
    if (in == a.output) {
      log::error("{}: the merged file (-o) must not be one of the inputs", in);
      return 2;
    }
  std::vector<std::string> ids;
  for (const auto& j : *jobs) ids.push_back(j.id);
  auto stats = batch::merge_results(a.inputs, ids, a.output);
  if (!stats) {
    log::error("{}", stats.message());
    return 1;
  }
  log::info("batch-merge: {} results from {} files -> {}", stats->jobs, stats->inputs, a.output);
  return 0;
}

}  // namespace

Command add_batch_merge(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  auto* sub = app.add_subcommand("batch-merge", "Merge shard results into one file; every job id exactly once");
  sub->alias("merge");
  sub->add_option("results", a->inputs, "Shard results files")->required();
  sub->add_option("--jobs", a->jobs, "The jobs file (or folder) the shards ran")->required();
  sub->add_option("-o,--output", a->output, "Merged results file (written only when every check passes)")->required();
  return {sub, [a] { return run_merge(*a); }};
}

}  // namespace strata::cli
