// Flags shared by the subcommands that run a model (generate, logits, perplexity, bench), named
// as llama.cpp users expect: -m, -c, -t, -b/--ubatch, -ctk/-ctv.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/trace.h"

#include <CLI/CLI.hpp>
#include <tbb/global_control.h>

#include "core/status.h"
#include "runtime/engine.h"
#include "offload/executor_plan.h"

namespace strata::cli {

// The planner's name for a KV cache type (offload/model_blocks.h).
offload::KvDtype planner_kv_dtype(GgmlType t);

// The most sessions open(n_seq = 0) chooses.
inline constexpr uint32_t kMaxAutoSessions = 8;

struct ModelArgs {
  std::string model;
  uint32_t n_ctx = 0;   // 0: min(model's training context, 4096)
  int threads = 0;      // 0: all cores
  uint32_t ubatch = 512;
  // KV cache types: --cache-type sets K and V, -ctk/-ctv (--cache-type-k/-v) override one each;
  // empty: the default (f32, or f16 under --vram).
  std::string cache_type, cache_type_k, cache_type_v;
  std::string device = "auto";
  // Offloading (CUDA): a VRAM budget makes the planner place every weight block; the engine
  // streams what is not resident.
  std::string vram, pinned, profile;
  uint32_t prefetch = 2;
  // Host-side tiers (with --vram; off by default until measured on the GPU machine):
  // --cpu-blocks lets the planner compute weight blocks on the CPU; --kv-host none|auto|all|N
  // puts full-attention layers' KV in host RAM (attention on the CPU): none, the planner's choice,
  // all of them, or the deepest N.
  bool cpu_blocks = false;
  std::string kv_host = "none";
  std::string trace_path;                 // --trace: where write_trace() puts the trace
  mutable std::shared_ptr<Trace> trace;   // made by open() when --trace was given
  // Filled by open() when a budget was planned: what the placement report and predictions use.
  mutable std::optional<offload::ExecutorPlan> executor_plan;

  void add_to(CLI::App* sub);
  // K and V types after defaults. Error: a name other than f32, f16, q8 (q8_0), q4 (q4_1).
  Result<std::pair<GgmlType, GgmlType>> kv_types() const;
  // --kv-host as plan_for_executor takes it: nullopt = the planner decides; else a layer count
  // (offload::kAllKvLayers for all). Error: not none, auto, all or a number.
  Result<std::optional<uint32_t>> kv_host_layers() const;
  // Loads the model and makes a forward pass; prints nothing. n_ctx_hint: the context the caller
  // needs at least (prompt + generation) when -c was not given. n_seq: sequences the engine holds
  // (throughput mode), each with its own KV cache; 0: chosen by choose_sessions() (the engine's
  // n_seq() says which, at most max_auto). Under --vram the planner places the weights in what
  // the budget leaves beside the n_seq caches.
  Result<std::unique_ptr<runtime::Engine>> open(uint32_t n_ctx_hint = 0, uint32_t n_seq = 1,
                                                uint32_t max_auto = kMaxAutoSessions) const;
  // Why open() chose its n_seq (one line for the log), when it chose.
  mutable std::string sessions_reason;
  // With a planned budget: the placement report (stderr) before the run, and after it the
  // predicted vs measured decode speed and the VRAM peak.
  void report_plan() const;
  // streamed: weight bytes the engine copied host -> device during the decode phase; host_compute_s:
  // CPU seconds of host-tier work (cpu-tier blocks, host-KV attention) in it.
  void report_measured(const runtime::Engine& e, double decode_tps, uint64_t streamed = 0, double decode_s = 0,
                       double host_compute_s = 0) const;
  // Writes the --trace file (nothing without --trace); says where it went and how to open it.
  Status write_trace() const;
  // Caps oneTBB's worker count at -t for the lifetime of the returned object.
  std::unique_ptr<tbb::global_control> thread_limit() const;
};

}  // namespace strata::cli
