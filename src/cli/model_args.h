// Flags shared by the subcommands that run a model (generate, logits, perplexity, bench, batch,
// stress), named as llama.cpp users expect: -m, -c, -t, -b/--ubatch, -ctk/-ctv. The options
// themselves are session::RunOptions; session::Session turns them into a plan and an engine.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "session/run_options.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

using session::kMaxAutoSessions;

struct ModelArgs : session::RunOptions {
  // Registers the flags (not --spec / --draft-max: the commands that decode add those).
  void add_to(CLI::App* sub);
  // --spec, --draft-max and --draft-window, as generate and serve take them.
  // default_by_plan: the command resolves an unset --spec by the plan (session/default_spec.h);
  // the returned option's count() says whether it was given.
  CLI::Option* add_spec_to(CLI::App* sub, bool default_by_plan = false);
};

// --draft-window SINKS,RECENT|auto|off into `text` (Session parses it with --spec).
void add_draft_window_option(CLI::App* sub, std::string& text);

// --prefill-group auto|N into `chunks` (offload::kPrefillGroupAuto for auto), as model commands and
// `plan` take it.
void add_prefill_group_option(CLI::App* sub, uint32_t& chunks);

// --cpu-blocks auto|on|off into `mode` (the name; session::RunOptions::cpu_blocks_mode and `plan`
// check it, so a bad one is one line from the command); the bare flag means on, as it did when
// --cpu-blocks was an opt-in switch.
void add_cpu_blocks_option(CLI::App* sub, std::string& mode);

// A command's model opened to run: the Session and, when asked for, its tokenizer. The commands
// that run a model (generate, serve, bench, batch, logits, perplexity) open it through here, so the
// same failure reads and exits the same everywhere. Errors are logged; the int returned is then
// the command's exit status (2: --spec / --draft-max do not fit the model; 1: the file, its
// tokenizer, or the engine), 0 when it worked.
struct OpenModel {
  std::unique_ptr<session::Session> session;
  const tokenizer::Tokenizer* tok = nullptr;  // set when opened with need_tokenizer

  // Session::open, then (need_tokenizer) Session::tokenizer.
  int open(const session::RunOptions& options, bool need_tokenizer);
  // Session::open_engine (placement under --vram, the engine, its sequences).
  int open_engine(uint32_t n_ctx_hint = 0, uint32_t n_seq = 1, uint32_t max_auto = kMaxAutoSessions);
};

// Writes the session's --trace file (nothing without --trace); says where it went and how to open it.
Status write_trace(const session::Session& s);

}  // namespace strata::cli
