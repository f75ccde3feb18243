// Fuzz target: the batch-job JSONL parser (one line, as load_jobs_file hands each line over).
// Every input must end in a Job or a Status; what parses must satisfy the contract the runner
// relies on (non-empty id, exactly one of text / file, ranges held).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "batch/job.h"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  batch::JobDefaults defaults;
  defaults.instruction = "Summarise.";
  auto job = batch::parse_job_line(line, 1, defaults, "/jobs");
  if (!job.is_ok()) {
    // Messages quote file content through printable(): they stay one line.
    if (job.message().find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  if (job->id.empty() || job->text.empty() == job->file.empty()) __builtin_trap();
  if (job->max_tokens == 0 || job->max_tokens > batch::kMaxTokensLimit) __builtin_trap();
  if (!job->instruction.empty() && !job->prompt_template.empty()) __builtin_trap();
  const auto& s = job->sampling;
  if (!(s.temperature >= 0) || s.top_k < 0 || !(s.top_p > 0 && s.top_p <= 1) || !(s.min_p >= 0 && s.min_p < 1) ||
      !(s.repeat_penalty > 0))
    __builtin_trap();
  return 0;
}
