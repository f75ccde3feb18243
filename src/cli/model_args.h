// Flags shared by the subcommands that run a model (generate, logits, perplexity, bench), named
// as llama.cpp users expect: -m, -c, -t, -b/--ubatch, -ctk.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <tbb/global_control.h>

#include "core/status.h"
#include "runtime/engine.h"

namespace strata::cli {

struct ModelArgs {
  std::string model;
  uint32_t n_ctx = 0;   // 0: min(model's training context, 4096)
  int threads = 0;      // 0: all cores
  uint32_t ubatch = 512;
  std::string kv_type = "f32";
  std::string device = "auto";

  void add_to(CLI::App* sub);
  // Loads the model and makes a forward pass; prints nothing. n_ctx_hint: the context the caller
  // needs at least (prompt + generation) when -c was not given.
  Result<std::unique_ptr<runtime::Engine>> open(uint32_t n_ctx_hint = 0) const;
  // Caps oneTBB's worker count at -t for the lifetime of the returned object.
  std::unique_ptr<tbb::global_control> thread_limit() const;
};

}  // namespace strata::cli
