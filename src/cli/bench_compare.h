// `strata bench <kind> --compare old.json`: an earlier result of the same bench, and each numeric
// figure printed old -> new with the change in percent.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/status.h"

namespace strata::cli {

// The numeric figures of a bench result, flattened to paths: "tok_per_s", "ceilings.host_read_gb_s",
// "matmul[q4_K ffn_up 27B].gemv1_us" (array elements are named by their string fields when those
// tell them apart, else by index: "results[2].kl_mean"). Booleans and strings are left out.
std::vector<std::pair<std::string, double>> bench_figures(const nlohmann::json& j);

// Loads a bench JSON (what `--json` wrote). Errors: the file is missing or unreadable, not JSON,
// not a bench result (an object with a "bench" field), or of another kind than `kind`.
Result<nlohmann::json> load_bench_json(const std::string& path, const std::string& kind);

// The comparison as text: a header, then per figure present in both "name  old -> new  +x.x%";
// figures in one result only are counted at the end, and descriptive fields that differ (model,
// device, ...) are named first.
std::string compare_bench(const nlohmann::json& old_result, const nlohmann::json& new_result,
                          const std::string& old_path);

// The flag on a bench subcommand: load() before the run (so a bad file fails fast), print() after.
struct BenchCompare {
  std::string path;
  nlohmann::json old;
  void add_to(CLI::App* sub);
  Status load(const std::string& kind);  // nothing to do without --compare
  void print(const nlohmann::json& now) const;
};

// The end every bench subcommand shares: the result written to json_out (when given; an error is
// logged in one line) and the comparison printed. Returns the exit status: 0, or 1 when the file
// could not be written.
int finish_bench(const nlohmann::json& result, const std::string& json_out, const BenchCompare& compare);

}  // namespace strata::cli
