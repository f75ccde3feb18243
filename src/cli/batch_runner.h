// Runs one batch job on an engine: builds the prompt (instruction or template, optionally inside
// the model's chat template), handles inputs longer than the context (--long), generates, and
// returns the result as the JSON line the journal appends. The engine serves one session, so jobs
// run one after another; the caller owns the order, the journal and the progress.
#pragma once

#include <cstdint>
#include <string>

#include "batch/batch_progress.h"
#include "batch/job.h"
#include "core/status.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

enum class LongMode { map_reduce, truncate, error };

struct RunnerOptions {
  tokenizer::ChatFamily chat = tokenizer::ChatFamily::none;
  LongMode long_mode = LongMode::map_reduce;
  uint32_t overlap = 64;  // map-reduce: tokens shared by neighbouring chunks
  uint64_t run_seed = 0;  // jobs without a seed get run_seed mixed with their id's hash
};

struct JobResult {
  bool interrupted = false;  // a signal arrived mid-job: nothing to write, the job runs again next time
  std::string line;          // the result as one JSON line (no '\n')
  uint32_t output_tokens = 0;
};

class JobRunner {
 public:
  JobRunner(runtime::Engine& engine, const tokenizer::Tokenizer& tok, RunnerOptions opt, batch::BatchProgress* progress)
      : engine_(engine), tok_(tok), opt_(opt), progress_(progress) {}
  // Errors (unreadable input, too long with --long error, engine failure) name the job.
  Result<JobResult> run(const batch::Job& job);

 private:
  struct Prompt { std::vector<int32_t> head, tail; };  // tokens around the input
  struct Generation {
    std::vector<int32_t> ids;  // generated, end-of-generation token excluded
    const char* stop = "length";
    bool interrupted = false;
    double prefill_ms = 0, decode_ms = 0;
  };
  Prompt make_prompt(const batch::Job& job) const;
  Result<Generation> generate(const std::vector<int32_t>& prompt, uint32_t max_tokens, const runtime::SamplerParams& sp);

  runtime::Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  RunnerOptions opt_;
  batch::BatchProgress* progress_;
};

}  // namespace strata::cli
