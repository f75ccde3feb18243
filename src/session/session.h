// One model run from its options to an engine: the model file opened once, the options checked
// (speculation included) before anything is planned, the placement planned under a VRAM budget
// (session/run_plan.h), the engine made, the tokenizer read. generate, bench decode, bench spec,
// batch, stress, logits and perplexity all start here; the step loop is session/decode.h.
//
// Order, and why: the model is opened first because --spec is checked against its layer count;
// the spec is parsed before planning because the plan's run shape carries the draft depth; the
// plan comes before the engine because the engine takes the plan's placement. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/trace.h"
#include "runtime/engine.h"
#include "runtime/model.h"
#include "offload/executor_plan.h"
#include "session/run_options.h"
#include "spec/spec_config.h"
#include "tokenizer/tokenizer.h"

namespace strata::session {

class Session {
 public:
  // Opens the model (weights mapped) and parses --spec / --draft-max against its layer count.
  // Prints nothing. Errors: the file (bad_options false) or the speculation options (bad_options
  // set to true: a usage error).
  static Result<std::unique_ptr<Session>> open(RunOptions options, bool* bad_options = nullptr);
  // The same from the header alone (a model whose tensor data is absent, `synth --header-only`):
  // enough to plan (plan_budget, and `strata plan`), not to make an engine.
  static Result<std::unique_ptr<Session>> open_header(RunOptions options, bool* bad_options = nullptr);

  const RunOptions& options() const { return opt_; }
  // The context the next open_engine() uses (-c); stress ramps it over one opened model.
  void set_n_ctx(uint32_t n_ctx) { opt_.n_ctx = n_ctx; }
  const runtime::Model& model() const { return *model_; }
  const spec::SpecConfig& spec() const { return spec_; }
  bool header_only() const { return header_only_; }
  // The model's tokenizer, read from the open file on first use (commands given token ids never
  // need one). Error: the file has no usable tokenizer.
  Result<const tokenizer::Tokenizer*> tokenizer();

  // The engine's options for this run before placement: context (-c, else min(training context,
  // 4096) raised to n_ctx_hint), prefill chunk, KV types, trace, one sequence. Errors: KV types,
  // --kv-host, host tiers without --vram, --vram with --device cpu.
  Result<runtime::ForwardOptions> forward_options(uint32_t n_ctx_hint = 0) const;
  // The prefill chunk (ForwardOptions::ubatch) when -b is not given: see session.cpp.
  uint32_t auto_ubatch(const runtime::ForwardOptions& fo) const;
  // Under --vram: plans this run (speculation included) with the KV caches of fo.n_seq sessions,
  // through plan_run, the function `strata plan` calls; sets fo's placement and budgets (runtime::use_plan).
  Result<offload::ExecutorPlan> plan_budget(runtime::ForwardOptions& fo) const;
  // The same run planned for plain decoding (no draft path, --require-draft-resident off), fo left
  // as it is: what a speculative plan's speed is honestly compared with (`bench spec` prints its
  // prediction beside the plan it runs, since a plan that keeps the draft path resident streams
  // more and decodes plainly slower).
  Result<offload::ExecutorPlan> plan_plain(runtime::ForwardOptions fo) const;
  // Plans (under --vram) and makes the engine, replacing one made before. n_ctx_hint: the context
  // the caller needs at least when -c was not given. n_seq: sequences the engine holds, each with
  // its own KV cache; 0: chosen (at most max_auto; sessions_reason() says why). Prints nothing.
  Status open_engine(uint32_t n_ctx_hint = 0, uint32_t n_seq = 1, uint32_t max_auto = kMaxAutoSessions);
  runtime::Engine& engine() { return *engine_; }
  const runtime::Engine& engine() const { return *engine_; }
  bool has_engine() const { return engine_ != nullptr; }
  // The plan the engine runs (under --vram), and why open_engine chose its n_seq.
  const std::optional<offload::ExecutorPlan>& executor_plan() const { return plan_; }
  const std::string& sessions_reason() const { return sessions_reason_; }

  // With a planned budget: the placement report (stderr) before the run, and after it the
  // predicted vs measured decode speed and the VRAM peak. streamed: weight bytes copied host ->
  // device during decode; host_compute_s: CPU seconds of host-tier work in it.
  void report_plan() const;
  void report_measured(double decode_tps, uint64_t streamed = 0, double decode_s = 0,
                       double host_compute_s = 0) const;
  // The trace of the run (with a trace path, from open_engine on; null otherwise).
  const std::shared_ptr<Trace>& trace() const { return trace_; }

 private:
  Session() = default;
  static Result<std::unique_ptr<Session>> finish_open(RunOptions options, std::shared_ptr<const runtime::Model> m,
                                                      bool header_only, bool* bad_options);
  Result<offload::ExecutorPlan> plan_with_extra(runtime::ForwardOptions& fo, uint64_t extra_vram,
                                                bool plain = false) const;
  // The KV caches of fo.n_seq sessions beyond the first.
  uint64_t extra_kv_vram(const runtime::ForwardOptions& fo) const;

  RunOptions opt_;
  std::shared_ptr<const runtime::Model> model_;
  bool header_only_ = false;
  spec::SpecConfig spec_;
  std::optional<tokenizer::Tokenizer> tok_;
  std::shared_ptr<Trace> trace_;
  std::unique_ptr<runtime::Engine> engine_;
  std::optional<offload::ExecutorPlan> plan_;
  std::string sessions_reason_;
};

}  // namespace strata::session
