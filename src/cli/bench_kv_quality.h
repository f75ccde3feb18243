// `strata bench kv-quality` (cmd_bench_kv_quality.cpp), registered under `strata bench`.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace strata::cli {

// Adds the subcommand; the returned function runs it when it was the one parsed, else returns -1.
std::function<int()> add_bench_kv_quality(CLI::App* bench);

}  // namespace strata::cli
