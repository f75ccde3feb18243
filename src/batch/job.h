// Batch jobs: what one line of a jobs file (JSONL) asks for, parsed and validated at the boundary
// so the runner trusts it. A job line:
//   {"id": "doc-1", "input": "text" | {"file": "path"}, "instruction": "..." | "template": "..{input}..",
//    "max_tokens": 256, "temperature": 0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
//    "repeat_penalty": 1.0, "seed": 7}
// Every field but id and input is optional; absent fields take the command line's defaults.
// Unknown fields are errors (a typo such as "temprature" must not silently fall back to the default).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace strata::batch {

// Values a job may override; the command line fills the defaults.
struct JobSampling {
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  std::optional<uint64_t> seed;  // absent: derived from the run's seed and the job id (stable on rerun)
};

struct Job {
  std::string id;
  std::string text;       // inline input; empty when file is set
  std::string file;       // input file (resolved against the jobs file's folder); "" for inline text
  std::string instruction;  // prompt = instruction + blank line + input
  std::string prompt_template;  // prompt = template with "{input}" replaced; exclusive with instruction
  uint32_t max_tokens = 256;
  JobSampling sampling;
  size_t line = 0;        // 1-based line in the jobs file (0: from a directory), for messages
};

struct JobDefaults {
  std::string instruction;  // --instruction: used by jobs that give neither instruction nor template
  uint32_t max_tokens = 256;
  JobSampling sampling;
};

inline constexpr uint32_t kMaxTokensLimit = 1u << 20;
inline constexpr std::string_view kInputMarker = "{input}";

// Parses one line. Errors read "line N: field 'x': problem" (the caller prefixes the file name).
// base_dir resolves relative input files.
Result<Job> parse_job_line(std::string_view line, size_t line_no, const JobDefaults& defaults,
                           const std::string& base_dir);

// Every non-blank line of a jobs file; the first error stops (with file and line); duplicate ids
// are an error naming both lines.
Result<std::vector<Job>> load_jobs_file(const std::string& path, const JobDefaults& defaults);

// One job per regular file in `dir` (recursively, hidden entries skipped, sorted by path); the id
// is the path relative to dir. Jobs use the defaults' instruction (required by the caller).
Result<std::vector<Job>> jobs_from_directory(const std::string& dir, const JobDefaults& defaults);

// A file or a directory, whichever `path` is.
Result<std::vector<Job>> load_jobs(const std::string& path, const JobDefaults& defaults);

// A job-file string as it may appear inside a one-line message: control bytes escaped (\n, \x01),
// cut to 80 bytes with "...". Ids and keys come from untrusted files.
std::string printable(std::string_view s);

// The job's input text (reads the file when it has one).
Result<std::string> read_input(const Job& job);

}  // namespace strata::batch
