// `strata bench kernels` (cmd_bench_kernels.cpp), registered under `strata bench`.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace strata::cli {

// Adds the subcommand; the returned function runs it when it was the one parsed, else returns -1.
std::function<int()> add_bench_kernels(CLI::App* bench);

}  // namespace strata::cli
