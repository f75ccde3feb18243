// Runs batch jobs on an engine: builds the prompt (instruction or template, optionally inside the
// model's chat template), handles inputs longer than the context (--long), generates, and returns
// the result as the JSON line the journal appends.
//
// Two ways to run:
// - JobRunner::run(job, seq): one job alone on one of the engine's sequences (map-reduce included).
// - BatchScheduler (throughput mode, `strata batch --batch N`): up to N jobs in flight on the
//   engine's N sequences; each is prefilled alone, then every in-flight session decodes one token
//   per step through Engine::eval_batch (one sweep over the weights serves them all). Since each
//   row of a batched step is bit-identical to a one-token decode of its sequence, and every
//   session has its own sampler, every job's output equals its output in a run of one at a time.
//   Jobs needing several passes (map-reduce) run alone on their slot while the others wait.
// The caller owns the order, the journal and the progress.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch/batch_progress.h"
#include "batch/job.h"
#include "core/status.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "spec/spec_config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::session {

enum class LongMode { map_reduce, truncate, error };

struct RunnerOptions {
  tokenizer::ChatFamily chat = tokenizer::ChatFamily::none;
  LongMode long_mode = LongMode::map_reduce;
  uint32_t overlap = 64;  // map-reduce: tokens shared by neighbouring chunks
  uint64_t run_seed = 0;  // jobs without a seed get run_seed mixed with their id's hash
  // Self-speculative decoding of a job run alone on sequence 0 (run(); throughput mode decodes
  // plainly). Greedy text is the plain text. spec_sampled false: jobs with a temperature decode
  // plainly, so that a resumed run samples the text an uninterrupted one would (auto's choices
  // follow measured timings, and speculative sampling draws its own random numbers).
  spec::SpecConfig spec = {};
  bool spec_sampled = true;
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
  // One job alone on sequence `seq`. Errors (unreadable input, too long with --long error, engine
  // failure) name the job.
  Result<JobResult> run(const batch::Job& job, uint32_t seq = 0);

  // Sessions written into result lines' "placement" (the batch size of throughput mode).
  void set_sessions(uint32_t n) { sessions_ = n; }

  // ---- pieces of run() that BatchScheduler drives step by step ----
  struct Prompt { std::vector<int32_t> head, tail; };  // tokens around the input
  // A job's inputs after --long truncate/error: what remains is one pass (or map-reduce).
  struct Setup {
    Prompt p;
    std::vector<int32_t> input;
    uint32_t budget = 0;  // input tokens that fit one pass
    runtime::SamplerParams sp;
    uint64_t seed = 0;
    nlohmann::ordered_json long_info;
    bool map_reduce() const { return input.size() > budget; }
  };
  Result<Setup> setup(const batch::Job& job) const;
  struct Generation {
    std::vector<int32_t> ids;  // generated, end-of-generation token excluded
    const char* stop = "length";
    bool interrupted = false;
    double prefill_ms = 0, decode_ms = 0;
    nlohmann::ordered_json speculative = nullptr;  // the result's "acceptance" (null: decoded plainly)
  };
  // One generation after its prompt was evaluated: decides the next token from the latest logits.
  // Returns the token to evaluate next, or -1 when the generation has ended (g.stop / interrupted).
  struct Stream {
    Stream(const runtime::SamplerParams& sp, size_t n_vocab, uint32_t max_tokens, uint32_t seq)
        : sampler(sp, n_vocab), max_tokens(max_tokens), seq(seq) {}
    runtime::Sampler sampler;
    uint32_t max_tokens, seq;
    std::vector<float> logits;
    Generation g;
  };
  int32_t next_token(Stream& s);
  // What next_token does with a token once sampled and accepted by s.sampler: ends the generation
  // at an end-of-generation token, at max_tokens, and (check_context) at a full context; else
  // returns it. A speculative round (several tokens from one pass) checks the context after its
  // last token only: n_past is already past the earlier ones, which plain decoding would emit.
  int32_t take_token(Stream& s, int32_t next, bool check_context = true);
  // The seed of a job's pass (map-reduce gives each pass its own).
  static uint64_t pass_seed(uint64_t seed, uint32_t pass) { return seed + uint64_t(pass) * 0x9e3779b97f4a7c15ull; }
  std::vector<int32_t> pass_prompt(const Prompt& p, std::span<const int32_t> input) const;
  struct Totals {
    uint64_t prompt_tokens = 0, output_tokens = 0;
    double prefill_ms = 0, decode_ms = 0;
  };
  JobResult result(const batch::Job& job, const Generation& g, const Totals& t, const nlohmann::ordered_json& long_info,
                   double total_ms) const;

  runtime::Engine& engine() { return engine_; }
  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  batch::BatchProgress* progress() { return progress_; }

 private:
  Prompt make_prompt(const batch::Job& job) const;
  Result<Generation> generate(const std::vector<int32_t>& prompt, uint32_t max_tokens, const runtime::SamplerParams& sp,
                              uint32_t seq);
  // generate() through the speculative decoder (sequence 0 only).
  Result<Generation> generate_speculative(const std::vector<int32_t>& prompt, uint32_t max_tokens,
                                          const runtime::SamplerParams& sp);

  runtime::Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  RunnerOptions opt_;
  batch::BatchProgress* progress_;
  uint32_t sessions_ = 1;
};

// Throughput mode: up to engine.n_seq() jobs in flight. Jobs come from `next` (nullptr: no more);
// each finished job goes to `done` with its result (or its error), in completion order.
class BatchScheduler {
 public:
  using NextJob = std::function<const batch::Job*()>;
  // Return false to stop the run (the journal failed): the in-flight jobs are dropped.
  using Done = std::function<bool(const batch::Job&, Result<JobResult>)>;
  explicit BatchScheduler(JobRunner& runner) : r_(runner) {}
  // Runs until `next` has no more jobs and every session has finished, or until interrupted (the
  // in-flight jobs are dropped: they run again on resume). Error: the engine failed in a batched
  // step (the jobs in flight are lost, like an engine failure of a single job, but for all).
  Status run(const NextJob& next, const Done& done);

 private:
  JobRunner& r_;
};

}  // namespace strata::session
