// Flags shared by the subcommands that run a model (generate, logits, perplexity, bench, batch,
// stress), named as llama.cpp users expect: -m, -c, -t, -b/--ubatch, -ctk/-ctv. The options
// themselves are session::RunOptions; session::Session turns them into a plan and an engine.
#pragma once

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "session/run_options.h"
#include "session/session.h"

namespace strata::cli {

using session::kMaxAutoSessions;

struct ModelArgs : session::RunOptions {
  // Registers the flags (not --spec / --draft-max: the commands that decode add those).
  void add_to(CLI::App* sub);
};

// Writes the session's --trace file (nothing without --trace); says where it went and how to open it.
Status write_trace(const session::Session& s);

}  // namespace strata::cli
