#include "batch/job.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/text_file.h"

namespace strata::batch {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  return std::string(v.is_object() ? "an object" : v.is_array() ? "an array" : v.type_name());
}

// A number field as float, with range checks whose message names the field.
Result<float> number_field(const json& v, const char* name, float lo, float hi, bool lo_open, bool hi_open = false) {
  if (!v.is_number()) return Status::error("field '{}': expected a number, got {}", name, type_name(v));
  const double x = v.get<double>();
  if ((lo_open ? x <= lo : x < lo) || (hi_open ? x >= hi : x > hi))
    return Status::error("field '{}': {} is out of range {}{}, {}{}", name, x, lo_open ? "(" : "[", lo, hi,
                         hi_open ? ")" : "]");
  return float(x);
}

Result<int64_t> integer_field(const json& v, const char* name, int64_t lo, int64_t hi) {
  // 1.0 is accepted as 1 (some writers emit floats); 1.5 is not. A float at or beyond +-2^63 has no
  // int64 (converting it is undefined behaviour: found by fuzz_jobs), so it is out of range.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= -0x1p63 && d < 0x1p63))
      return Status::error("field '{}': {} is out of range [{}, {}]", name, d, lo, hi);
    if (d == std::trunc(d)) return integer_field(json(int64_t(d)), name, lo, hi);
  }
  if (!v.is_number_integer()) return Status::error("field '{}': expected an integer, got {}", name, type_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    return Status::error("field '{}': {} is out of range [{}, {}]", name, v.get<uint64_t>(), lo, hi);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return Status::error("field '{}': {} is out of range [{}, {}]", name, x, lo, hi);
  return x;
}

Result<std::string> string_field(const json& v, const char* name) {
  if (!v.is_string()) return Status::error("field '{}': expected a string, got {}", name, type_name(v));
  return v.get<std::string>();
}

Status parse_fields(const json& doc, const JobDefaults& defaults, const std::string& base_dir, Job& job) {
  if (!doc.is_object()) return Status::error("expected a JSON object, got {}", type_name(doc));
  static const char* known[] = {"id", "input", "instruction", "template", "max_tokens", "temperature",
                                "top_k", "top_p", "min_p", "repeat_penalty", "seed"};
  for (const auto& item : doc.items()) {
    // Not a structured binding: clang < 16 (the fuzz build's compiler) cannot capture one.
    const std::string& key = item.key();
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) == std::end(known))
      return Status::error("unknown field '{}'", printable(key));
  }

  auto id = doc.find("id");
  if (id == doc.end()) return Status::error("field 'id': missing");
  if (id->is_string()) job.id = id->get<std::string>();
  else if (id->is_number_integer()) job.id = id->dump();  // 7 and "7" name the same job
  else return Status::error("field 'id': expected a string or an integer, got {}", type_name(*id));
  if (job.id.empty()) return Status::error("field 'id': empty");

  auto input = doc.find("input");
  if (input == doc.end()) return Status::error("field 'input': missing (text, or {{\"file\": path}})");
  if (input->is_string()) {
    job.text = input->get<std::string>();
    if (job.text.empty()) return Status::error("field 'input': empty text");
  } else if (input->is_object()) {
    auto f = input->find("file");
    if (f == input->end() || input->size() != 1)
      return Status::error("field 'input': an object must be exactly {{\"file\": path}}");
    if (!f->is_string() || f->get<std::string>().empty())
      return Status::error("field 'input.file': expected a non-empty path string");
    fs::path p = f->get<std::string>();
    job.file = (p.is_relative() && !base_dir.empty() ? fs::path(base_dir) / p : p).string();
  } else {
    return Status::error("field 'input': expected text or {{\"file\": path}}, got {}", type_name(*input));
  }

  const bool has_instr = doc.contains("instruction"), has_tmpl = doc.contains("template");
  if (has_instr && has_tmpl) return Status::error("fields 'instruction' and 'template': give one, not both");
  if (has_instr) {
    auto s = string_field(doc["instruction"], "instruction");
    if (!s) return s.status();
    job.instruction = *s;
  } else if (has_tmpl) {
    auto s = string_field(doc["template"], "template");
    if (!s) return s.status();
    if (s->find(kInputMarker) == std::string::npos)
      return Status::error("field 'template': has no {} placeholder", kInputMarker);
    job.prompt_template = *s;
  } else {
    job.instruction = defaults.instruction;
  }

  job.max_tokens = defaults.max_tokens;
  job.sampling = defaults.sampling;
  if (auto v = doc.find("max_tokens"); v != doc.end()) {
    auto x = integer_field(*v, "max_tokens", 1, kMaxTokensLimit);
    if (!x) return x.status();
    job.max_tokens = uint32_t(*x);
  }
  auto& s = job.sampling;
  if (auto v = doc.find("temperature"); v != doc.end()) {
    auto x = number_field(*v, "temperature", 0.0f, 100.0f, false);
    if (!x) return x.status();
    s.temperature = *x;
  }
  if (auto v = doc.find("top_k"); v != doc.end()) {
    auto x = integer_field(*v, "top_k", 0, INT32_MAX);
    if (!x) return x.status();
    s.top_k = int32_t(*x);
  }
  if (auto v = doc.find("top_p"); v != doc.end()) {
    auto x = number_field(*v, "top_p", 0.0f, 1.0f, true);
    if (!x) return x.status();
    s.top_p = *x;
  }
  if (auto v = doc.find("min_p"); v != doc.end()) {
    auto x = number_field(*v, "min_p", 0.0f, 1.0f, false, true);  // the sampler's range
    if (!x) return x.status();
    s.min_p = *x;
  }
  if (auto v = doc.find("repeat_penalty"); v != doc.end()) {
    auto x = number_field(*v, "repeat_penalty", 0.0f, 100.0f, true);
    if (!x) return x.status();
    s.repeat_penalty = *x;
  }
  if (auto v = doc.find("seed"); v != doc.end()) {
    // nlohmann stores non-negative integers as unsigned: anything else is negative or not an integer.
    if (!v->is_number_unsigned())
      return Status::error("field 'seed': expected a non-negative integer, got {}",
                           v->is_number_integer() ? v->dump() : type_name(*v));
    s.seed = v->get<uint64_t>();
  }
  return Status::ok();
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  const size_t n = std::min<size_t>(s.size(), 80);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  if (s.size() > n) out += "...";
  return out;
}

Result<Job> parse_job_line(std::string_view line, size_t line_no, const JobDefaults& defaults,
                           const std::string& base_dir) {
  Job job;
  job.line = line_no;
  json doc;
  try {
    doc = json::parse(line.begin(), line.end());
  } catch (const json::parse_error& e) {
    return Status::error("line {}: invalid JSON at byte {}", line_no, e.byte);
  } catch (const json::exception& e) {
    // Not only parse_error: a number literal beyond double's range (2e308) throws out_of_range.
    std::string_view what = e.what();
    if (auto p = what.find("] "); p != what.npos) what.remove_prefix(p + 2);  // drop "[json.exception...]"
    return Status::error("line {}: invalid JSON: {}", line_no, printable(what));
  }
  if (Status s = parse_fields(doc, defaults, base_dir, job); !s) {
    // Name the job too when the id was readable: "line 4 (id 'x'): ...".
    const std::string where = job.id.empty() ? fmt::format("line {}", line_no)
                                             : fmt::format("line {} (id '{}')", line_no, printable(job.id));
    return Status::error("{}: {}", where, s.message());
  }
  return job;
}

Result<std::vector<Job>> load_jobs_file(const std::string& path, const JobDefaults& defaults) {
  auto text = read_text_file(path, "jobs file");
  if (!text) return text.status();
  const std::string base = fs::path(path).parent_path().string();
  std::vector<Job> jobs;
  std::map<std::string, size_t> seen;  // id -> line
  size_t pos = 0, line_no = 0;
  while (pos < text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    std::string_view line(text->data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    auto job = parse_job_line(line, line_no, defaults, base);
    if (!job) return job.status().with_context(path);
    if (auto [it, fresh] = seen.emplace(job->id, line_no); !fresh)
      return Status::error("{}: line {}: duplicate id '{}' (first on line {})", path, line_no, printable(job->id),
                           it->second);
    jobs.push_back(std::move(*job));
  }
  if (jobs.empty()) return Status::error("{}: no jobs (the file is empty)", path);
  return jobs;
}

Result<std::vector<Job>> jobs_from_directory(const std::string& dir, const JobDefaults& defaults) {
  std::vector<fs::path> files;
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
  if (ec) return Status::error("{}: cannot list the folder ({})", dir, ec.message());
  for (auto end = fs::recursive_directory_iterator(); it != end; it.increment(ec)) {
    if (ec) return Status::error("{}: cannot list the folder ({})", dir, ec.message());
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {  // .git, editor swap files, ...
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path());
  }
  if (files.empty()) return Status::error("{}: no documents in the folder", dir);
  std::sort(files.begin(), files.end());
  std::vector<Job> jobs;
  for (const auto& f : files) {
    Job job;
    job.id = fs::relative(f, dir).generic_string();
    // Ids are written into JSON results; a name that is not UTF-8 could not be matched on resume.
    try {
      (void)json(job.id).dump();
    } catch (const json::type_error&) {
      return Status::error("{}: the file name is not valid UTF-8 (rename it to use it as a job id)", f.string());
    }
    job.file = f.string();
    job.instruction = defaults.instruction;
    job.max_tokens = defaults.max_tokens;
    job.sampling = defaults.sampling;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Result<std::vector<Job>> load_jobs(const std::string& path, const JobDefaults& defaults) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return jobs_from_directory(path, defaults);
  if (!fs::exists(path, ec)) return Status::error("{}: no such jobs file or folder", path);
  return load_jobs_file(path, defaults);
}

Result<std::string> read_input(const Job& job) {
  if (job.file.empty()) return job.text;
  auto text = read_text_file(job.file, "input document");
  if (!text) return Status::error("job '{}': {}", printable(job.id), text.message());
  if (text->empty()) return Status::error("job '{}': {}: the input document is empty", printable(job.id), job.file);
  return text;
}

}  // namespace strata::batch
