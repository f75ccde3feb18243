// Subcommands of `strata bench` that live in their own files.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace strata::cli {

// Adds the subcommand; the returned function runs it when it was the one parsed, else returns -1.
std::function<int()> add_bench_kernels(CLI::App* bench);
// `strata bench spec` (cmd_bench_spec.cpp): plain vs speculative decoding in the same run.
std::function<int()> add_bench_spec(CLI::App* bench);
// `strata bench cpu-kernels` (cmd_bench_cpu_kernels.cpp): f32- vs int8-activation CPU matmul, 1..16 columns.
std::function<int()> add_bench_cpu_kernels(CLI::App* bench);

}  // namespace strata::cli
