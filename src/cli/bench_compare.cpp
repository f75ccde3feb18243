#include "cli/bench_compare.h"

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "cli/output_file.h"
#include "core/log.h"

namespace strata::cli {
namespace {

using json = nlohmann::json;

// The name of an array element: its string fields, when every element's name is distinct.
std::vector<std::string> element_names(const json& arr) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  bool ok = true;
  for (const auto& e : arr) {
    std::string n;
    if (e.is_object())
      for (const auto& [k, v] : e.items())
        if (v.is_string()) n += (n.empty() ? "" : " ") + v.get<std::string>();
    if (n.empty() || !seen.insert(n).second) ok = false;
    names.push_back(n);
  }
  if (!ok)
    for (size_t i = 0; i < names.size(); ++i) names[i] = std::to_string(i);
  return names;
}

void flatten(const json& j, const std::string& path, std::vector<std::pair<std::string, double>>& out) {
  if (j.is_number()) {
    out.emplace_back(path, j.get<double>());
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, path.empty() ? k : path + "." + k, out);
  } else if (j.is_array()) {
    const auto names = element_names(j);
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], path + "[" + names[i] + "]", out);
  }
}

std::string number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  const double a = std::fabs(v);
  if (a != 0 && (a < 1e-3 || a >= 1e7)) return fmt::format("{:.4g}", v);
  return fmt::format("{:.{}f}", v, a >= 100 ? 1 : a >= 1 ? 2 : 4);
}

}  // namespace

std::vector<std::pair<std::string, double>> bench_figures(const json& j) {
  std::vector<std::pair<std::string, double>> out;
  flatten(j, "", out);
  return out;
}

Result<json> load_bench_json(const std::string& path, const std::string& kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("--compare {}: cannot open the file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return Status::error("--compare {}: not a JSON file", path);
  if (!j.is_object() || !j.contains("bench") || !j["bench"].is_string())
    return Status::error("--compare {}: not a strata bench result (no \"bench\" field; write one with --json)", path);
  const std::string was = j["bench"].get<std::string>();
  if (was != kind)
    return Status::error("--compare {}: a 'bench {}' result, not 'bench {}'", path, was, kind);
  return j;
}

std::string compare_bench(const json& old_result, const json& new_result, const std::string& old_path) {
  std::string out = fmt::format("compared with {} (bench {}):\n", old_path, new_result.value("bench", "?"));
  // Descriptive fields that differ: the runs may not be comparable.
  for (const auto& [k, v] : new_result.items())
    if (v.is_string() && k != "bench" && old_result.contains(k) && old_result[k].is_string() && old_result[k] != v)
      out += fmt::format("  note: {} differs: {} -> {}\n", k, old_result[k].get<std::string>(), v.get<std::string>());
  const auto old_f = bench_figures(old_result), new_f = bench_figures(new_result);
  std::map<std::string, double> old_map(old_f.begin(), old_f.end());
  size_t width = 0;
  for (const auto& [k, v] : new_f)
    if (old_map.count(k)) width = std::max(width, k.size());
  size_t only_new = 0, matched = 0;
  std::set<std::string> seen;
  for (const auto& [k, v] : new_f) {
    seen.insert(k);
    const auto it = old_map.find(k);
    if (it == old_map.end()) {
      ++only_new;
      continue;
    }
    ++matched;
    const double o = it->second;
    const std::string change = o != 0 ? fmt::format("{:+.1f}%", 100.0 * (v - o) / std::fabs(o))
                                      : (v == 0 ? std::string("+0.0%") : std::string("n/a"));
    out += fmt::format("  {:<{}}  {:>12} -> {:<12} {:>8}\n", k, width, number(o), number(v), change);
  }
  size_t only_old = 0;
  for (const auto& [k, v] : old_f) only_old += !seen.count(k);
  if (matched == 0) out += "  no figure in common\n";
  if (only_new || only_old)
    out += fmt::format("  ({} figure{} only in the new result, {} only in the old)\n", only_new,
                       only_new == 1 ? "" : "s", only_old);
  return out;
}

void BenchCompare::add_to(CLI::App* sub) {
  sub->add_option("--compare", path, "An earlier --json result of this bench: print each figure old -> new with "
                                     "the change in percent");
}

Status BenchCompare::load(const std::string& kind) {
  if (path.empty()) return {};
  auto j = load_bench_json(path, kind);
  if (!j) return j.status();
  old = std::move(j.value());
  return {};
}

void BenchCompare::print(const json& now) const {
  if (path.empty()) return;
  fmt::print("{}", compare_bench(old, now, path));
}

int finish_bench(const nlohmann::json& result, const std::string& json_out, const BenchCompare& compare) {
  if (!json_out.empty()) {
    if (Status s = write_output_file(json_out, result.dump(2) + "\n"); !s) {
      log::error("{}", s.message());
      return 1;
    }
  }
  compare.print(result);
  return 0;
}

}  // namespace strata::cli
