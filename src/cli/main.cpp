// strata: run LLMs larger than the GPU. One program, subcommands (see --help).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/log.h"

int main(int argc, char** argv) {
  CLI::App app{"strata: an inference engine for LLMs larger than the GPU (GGUF models)", "strata"};
  app.set_version_flag("--version", "strata 0.1.0");
  app.require_subcommand(1);
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Print debug diagnostics");
  app.add_flag("-q,--quiet", quiet, "Print only errors");

  const std::vector<strata::cli::Command> commands = {
      strata::cli::add_generate(app),
      strata::cli::add_logits(app),
      strata::cli::add_perplexity(app),
      strata::cli::add_bench(app),
      strata::cli::add_plan(app),
      strata::cli::add_probe(app),
      strata::cli::add_batch(app),
      strata::cli::add_batch_merge(app),
      strata::cli::add_stress(app),
      strata::cli::add_serve(app),
      strata::cli::add_inspect(app),
      strata::cli::add_synth(app),
      strata::cli::add_export_hf(app),
      strata::cli::add_quantize(app),
      strata::cli::add_imatrix(app),
      strata::cli::add_convert(app),
      strata::cli::add_tokenize(app),
      strata::cli::add_vocab(app),
  };

  // llama.cpp spells some long options with one dash (-ctk, -ctv); CLI11 allows one-letter short
  // names only, so those are rewritten to their long forms first.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {  // CLI11 takes the arguments in reverse order
    const std::string a = argv[i];
    args.push_back(a == "-ctk" ? "--cache-type-k" : a == "-ctv" ? "--cache-type-v" : a);
  }
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (verbose) strata::log::set_level(strata::log::Level::debug);
  if (quiet) strata::log::set_level(strata::log::Level::quiet);
  for (const auto& c : commands)
    if (c.sub->parsed()) return c.run();
  return 2;
}
