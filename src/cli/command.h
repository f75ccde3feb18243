// Each subcommand registers itself on the CLI11 app and returns the function that runs it.
// A command returns the process exit status: 0 ok, 1 failure (message already printed), 2 usage.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace strata::cli {

struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

Command add_inspect(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_export_hf(CLI::App& app);
Command add_quantize(CLI::App& app);
Command add_imatrix(CLI::App& app);
Command add_convert(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_vocab(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_logits(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_probe(CLI::App& app);
Command add_batch(CLI::App& app);
Command add_batch_merge(CLI::App& app);
Command add_stress(CLI::App& app);
Command add_serve(CLI::App& app);

}  // namespace strata::cli
