// strata batch: many prompts or documents through one loaded model, with results that survive
// crashes (see batch/journal.h), resume by rerunning the same command, and split across machines
// with --shard. Results go to the -o file only; progress and messages to stderr.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>

#include "batch/batch_progress.h"
#include "batch/job.h"
#include "batch/journal.h"
#include "batch/shard.h"
#include "cli/command.h"
#include "cli/model_args.h"
#include "cli/placement_report.h"
#include "core/log.h"
#include "session/batch_runner.h"
#include "session/interrupt.h"
#include "session/session.h"

namespace strata::cli {
namespace {

using session::BatchScheduler;
using session::interrupt_exit_code;
using session::interrupt_signal;
using session::interrupted;
using session::JobResult;
using session::JobRunner;
using session::LongMode;
using session::RunnerOptions;

struct BatchArgs {
  ModelArgs m;
  std::string jobs, output, instruction, long_mode = "map-reduce", shard;
  uint32_t max_tokens = 256, overlap = 64, batch = 0;  // batch 0: chosen from the budget
  batch::JobSampling sampling;
  uint64_t seed = 0;
  bool chat = false, no_progress = false;
  bool spec_default = false;  // --spec not given: auto or none by the plan, greedy jobs only
};

int run_batch(BatchArgs a) {
  const auto limit = a.m.thread_limit();
  // Before anything slow, so a signal during model loading also ends in a clean, resumable exit.
  session::install_interrupt_handlers();
  RunnerOptions ro;
  if (a.long_mode == "map-reduce") ro.long_mode = LongMode::map_reduce;
  else if (a.long_mode == "truncate") ro.long_mode = LongMode::truncate;
  else if (a.long_mode == "error") ro.long_mode = LongMode::error;
  else {
    log::error("unknown --long '{}' (map-reduce, truncate, error)", a.long_mode);
    return 2;
  }
  {
    runtime::SamplerParams sp;  // the defaults jobs inherit: same ranges and messages as generate's
    sp.temperature = a.sampling.temperature;
    sp.top_k = a.sampling.top_k;
    sp.top_p = a.sampling.top_p;
    sp.min_p = a.sampling.min_p;
    sp.repeat_penalty = a.sampling.repeat_penalty;
    if (Status s = sp.validate(); !s) {
      log::error("{}", s.message());
      return 2;
    }
  }
  ro.overlap = a.overlap;
  ro.run_seed = a.seed;
  batch::Shard shard;
  if (!a.shard.empty()) {
    auto s = batch::parse_shard(a.shard);
    if (!s) {
      log::error("{}", s.message());
      return 2;
    }
    shard = *s;
  }
  // --spec (other than none) decodes one job at a time: checked before the results file is touched.
  const bool spec_asked = !a.spec_default && a.m.spec != "none";
  if (spec_asked && a.batch > 1) {
    log::error("--spec {} decodes one job at a time, --batch {} several together without speculation: give one of "
               "them", a.m.spec, a.batch);
    return 2;
  }
  std::error_code ec;
  if (std::filesystem::equivalent(a.jobs, a.output, ec)) {
    log::error("{}: the results file (-o) must not be the jobs file", a.output);
    return 2;
  }
  if (std::filesystem::is_directory(a.jobs, ec) && a.instruction.empty()) {
    log::error("{}: a folder of documents needs --instruction (what to do with each document)", a.jobs);
    return 2;
  }
  batch::JobDefaults defaults{a.instruction, a.max_tokens, a.sampling};
  auto all = batch::load_jobs(a.jobs, defaults);
  if (!all) {
    log::error("{}", all.message());
    return 2;
  }
  std::vector<batch::Job> mine;
  for (auto& j : *all) {
    // A results file inside the folder of documents must not become a document on the rerun.
    if (!j.file.empty() && std::filesystem::equivalent(j.file, a.output, ec)) continue;
    if (shard.contains(j.id)) mine.push_back(std::move(j));
  }

  auto journal = batch::ResultsJournal::open(a.output);
  if (!journal) {
    log::error("{}", journal.message());
    return 1;
  }
  std::vector<const batch::Job*> todo;
  for (const auto& j : mine)
    if (!journal->has(j.id)) todo.push_back(&j);
  const size_t skipped = mine.size() - todo.size();
  const std::string shard_note = shard.count > 1 ? fmt::format(" (shard {}/{})", shard.index, shard.count) : "";
  if (todo.empty()) {
    log::info("batch: all {} jobs{} already have results in {}; nothing to do", mine.size(), shard_note, a.output);
    return 0;
  }
  if (interrupted()) {  // before the model was opened: nothing new written, and it says so
    log::warn("batch: interrupted by {} before any job ran; rerun the same command to resume",
              interrupt_signal() == SIGTERM ? "SIGTERM" : "SIGINT");
    return interrupt_exit_code();
  }

  // Never more sessions than jobs to run. A --spec other than none decodes one job at a time.
  OpenModel om;
  if (int rc = om.open(a.m, true)) return rc;
  const uint32_t want = spec_asked ? 1u : a.batch ? uint32_t(std::min<size_t>(a.batch, todo.size())) : 0;
  if (int rc = om.open_engine(0, want, uint32_t(std::min<size_t>(todo.size(), kMaxAutoSessions)))) return rc;
  auto& ses = *om.session;
  auto& e = ses.engine();
  const uint32_t sessions = uint32_t(std::min<size_t>(e.n_seq(), todo.size()));
  // Speculation (one session): --spec as given, for every job; without --spec, auto where the plan
  // predicts a gain (as generate decides), for greedy jobs only, so that a resumed run samples
  // the text an uninterrupted one would.
  std::string spec_line = "none";
  if (sessions == 1) {
    ro.spec = ses.spec();
    if (a.spec_default) {
      const uint64_t gen = a.max_tokens;
      auto d = default_speculation(ses, std::nullopt, a.m.profile, a.m.device != "cpu", report_shape(ses, 0, gen));
      ro.spec = d ? d->config : spec::SpecConfig{};
      ro.spec_sampled = false;
      if (d)
        spec_line = d->decision.reason + (ro.spec.mode != spec::SpecMode::none ? " (greedy jobs; sampled ones decode plainly)" : "");
      else log::warn("default speculation: {}; decoding plainly", d.message());
    } else {
      spec_line = ro.spec.text();
    }
  }
  const tokenizer::Tokenizer* tok = om.tok;
  if (a.chat) {
    ro.chat = tokenizer::detect_chat_family(tok->chat_template());
    if (ro.chat == tokenizer::ChatFamily::none)
      log::warn("--chat: the model has no chat template strata knows; using plain prompts");
  }
  log::info("batch: {} jobs{}, {} already done, {} to run | {} | ctx {} | {}", mine.size(), shard_note, skipped,
            todo.size(), e.model().spec.summary(), e.n_ctx(), e.device_name());
  log::info("batch: {} session{} decoding together ({}){}", sessions, sessions == 1 ? "" : "s",
            spec_asked ? "--spec" : a.batch ? "--batch" : ses.sessions_reason().empty() ? "default" : ses.sessions_reason(),
            sessions > 1 ? "; speculative decoding is off in throughput mode" : "");
  if (sessions == 1) log::info("spec: {}", spec_line);

  batch::BatchProgress progress(todo.size(), skipped, !a.no_progress);
  JobRunner runner(e, *tok, ro, &progress);
  runner.set_sessions(sessions);
  size_t written = 0, failed = 0;
  bool journal_failed = false;
  // A finished job: its result line appended (durable before the next job starts), or its error
  // reported. A job that cannot run (unreadable or too long input) is reported and skipped; it has
  // no result line, so merge reports it missing and a rerun tries it again.
  auto done = [&](const batch::Job& job, Result<JobResult> r) -> bool {
    if (!r) {
      progress.clear();
      log::error("{}", r.message());
      progress.job_failed();
      ++failed;
      return true;
    }
    if (Status s = journal->append(job.id, r->line); !s) {
      progress.clear();
      log::error("{}", s.message());
      journal_failed = true;
      return false;
    }
    ++written;
    progress.job_done();
    return true;
  };
  if (sessions <= 1) {
    for (const batch::Job* job : todo) {
      if (interrupted()) break;
      auto r = runner.run(*job);
      if (r && r->interrupted) break;  // the in-flight job is dropped; it reruns on resume
      if (!done(*job, std::move(r))) return 1;
    }
  } else {
    size_t next = 0;
    BatchScheduler sched(runner);
    Status st = sched.run([&]() -> const batch::Job* { return next < todo.size() ? todo[next++] : nullptr; }, done);
    if (journal_failed) return 1;
    if (!st) {
      progress.clear();
      log::error("{}", st.message());
      return 1;
    }
  }
  progress.finish();
  if (interrupted()) {
    log::warn("batch: interrupted by {} after {} new results; rerun the same command to resume",
              interrupt_signal() == SIGTERM ? "SIGTERM" : "SIGINT", written);
    return interrupt_exit_code();
  }
  log::info("batch: {} written, {} failed, {} already done; results in {}", written, failed, skipped, a.output);
  return failed ? 1 : 0;
}

}  // namespace

Command add_batch(CLI::App& app) {
  auto a = std::make_shared<BatchArgs>();
  auto* sub = app.add_subcommand("batch", "Run a JSONL file of jobs (or a folder of documents) into a durable, "
                                          "resumable results file");
  sub->add_option("jobs", a->jobs, "Jobs file (JSON lines) or a folder of documents")->required();
  sub->add_option("-o,--output", a->output, "Results file (JSON lines; appended, resumed from)")->required();
  a->m.add_to(sub);
  sub->add_option("--instruction", a->instruction,
                  "Instruction for jobs that give neither instruction nor template (required for a folder)");
  sub->add_option("-n,--max-tokens", a->max_tokens, "Default max_tokens per job")
      ->capture_default_str()->check(CLI::Range(1u, batch::kMaxTokensLimit));
  sub->add_option("--long", a->long_mode, "Inputs longer than the context: map-reduce (summarise chunks, then the "
                                          "summaries), truncate (keep the beginning) or error")
      ->capture_default_str();
  sub->add_option("--overlap", a->overlap, "map-reduce: tokens shared by neighbouring chunks")->capture_default_str();
  sub->add_option("--shard", a->shard, "Run only shard i of N (i/N, 0-based; by hash of the job id)");
  sub->add_option("--batch", a->batch,
                  "Sessions decoding together (throughput mode): up to N jobs in flight, each prefilled alone, "
                  "then all decoding one token per step in one sweep over the weights; results as with 1. "
                  "Default: chosen from the budget (under --vram the planner's fastest N <= 8; on a GPU without "
                  "--vram as many as fit, up to 8; 1 on the CPU, and 1 with --spec). Map-reduce jobs run alone; "
                  "speculative decoding is off in this mode")
      ->check(CLI::Range(1u, 64u));
  sub->add_flag("--chat", a->chat, "Wrap each prompt in the model's chat template (gemma, llama3, chatml)");
  sub->add_option("--temp", a->sampling.temperature, "Default temperature (0: greedy)")->capture_default_str();
  sub->add_option("--top-k", a->sampling.top_k, "Default top-k (0: off)")->capture_default_str();
  sub->add_option("--top-p", a->sampling.top_p, "Default top-p (1: off)")->capture_default_str();
  sub->add_option("--min-p", a->sampling.min_p, "Default min-p (0: off)")->capture_default_str();
  sub->add_option("--repeat-penalty", a->sampling.repeat_penalty, "Default repetition penalty (1: off)")
      ->capture_default_str();
  sub->add_option("-s,--seed", a->seed, "Run seed: jobs without a seed use it mixed with their id (fixed, so a "
                                        "resumed run repeats itself)")
      ->capture_default_str();
  sub->add_flag("--no-progress", a->no_progress, "No progress line");
  auto* spec_opt = a->m.add_spec_to(sub, true);
  spec_opt->description(spec_opt->get_description() +
                        ". In batch: jobs decode one at a time when --spec is given (not with --batch N > 1); "
                        "without it, auto applies to greedy jobs when one session runs, and the result's "
                        "\"acceptance\" says how the drafts fared");
  return {sub, [a, spec_opt] {
            a->spec_default = spec_opt->count() == 0;
            return run_batch(*a);
          }};
}

}  // namespace strata::cli
