// The options of one model run as the flags give them (cli/model_args.h binds them to flags):
// the model file, context and KV types, device, the budgets the planner places weights under,
// and speculative decoding. Plain data: Session (session.h) turns them into a plan and an engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <tbb/global_control.h>

#include "core/ggml_type.h"
#include "core/status.h"
#include "offload/executor_plan.h"
#include "offload/model_blocks.h"

namespace strata::session {

// The most sessions Session::open_engine(n_seq = 0) chooses.
inline constexpr uint32_t kMaxAutoSessions = 8;

// The planner's name for a KV cache type (offload/model_blocks.h).
offload::KvDtype planner_kv_dtype(GgmlType t);

// RunOptions::ubatch's default: 512 on the CPU engine and under a VRAM budget (where layer-major
// groups amortise the streamed weights), the largest of 4096 / 2048 / 1024 that fits beside the
// resident weights on the GPU (auto_ubatch in session.cpp says why).
inline constexpr uint32_t kUbatchAuto = 0;
inline constexpr uint32_t kDefaultUbatch = 512;

// `--cpu-matmul` resolved: whether the CPU's decode and verification rows take int8-rounded
// activations (ForwardOptions::cpu_int8, RunShape::cpu_int8). int8 and auto: yes -- the CUDA
// engine's cpu-tier blocks then round activations as its GPU kernels do, and the CPU engine
// decodes as llama.cpp's CPU backend does (activations quantised once per matmul, weights read at
// memory speed: 1.2-1.5x the f32-activation kernels' decode); exact: no, the f32-activation
// reference (what the engine-level tests compare against). Error: another name.
Result<bool> resolve_cpu_int8(const std::string& cpu_matmul);

struct RunOptions {
  std::string model;
  uint32_t n_ctx = 0;   // 0: min(model's training context, 4096), or more when the run needs it
  int threads = 0;      // 0: all cores
  // Tokens per prefill chunk (-b); kUbatchAuto: Session::forward_options picks (auto_ubatch).
  uint32_t ubatch = kUbatchAuto;
  // KV cache types: cache_type sets K and V, cache_type_k / _v override one each; empty: the
  // default (f16 where the run uses the GPU, f32 on the CPU engine).
  std::string cache_type, cache_type_k, cache_type_v;
  std::string device = "auto";  // auto | cpu | cuda
  // auto | exact | int8: how the CPU multiplies (ForwardOptions::cpu_int8; cpu_int8() resolves auto).
  std::string cpu_matmul = "auto";
  // Offloading (CUDA): a VRAM budget makes the planner place every weight block; the engine
  // streams what is not resident.
  std::string vram, pinned, profile;
  uint32_t prefetch = 0;  // streamed blocks in flight (0: auto, offload/planner.h prefetch_depth_for)
  // Chunks of a layer-major prefill group the plan reserves VRAM for before placing weights
  // (offload::RunShape::prefill_group_reserve); 0: only what the weights leave; 0xffffffff
  // (offload::kPrefillGroupAuto, the default): the planner picks it by predicted job time.
  uint32_t prefill_group = 0xffffffffu;
  // Host-side tiers (with a budget): cpu_blocks off|on|auto lets the planner compute weight blocks
  // on the CPU (auto: where it predicts at least offload::kCpuTierMinGain more decode speed,
  // offload::plan_with_cpu_tier; the report's "cpu tier:" line says which and why); kv_host
  // none|auto|all|N puts full-attention layers' KV in host RAM. cpu_blocks is auto by default since
  // the cost model charges the measured partial overlap of copies and CPU work (kCpuOverlapLoss)
  // and two placements on the H100 host ran at 101% of their prediction (27B, --vram 12GiB: 24-27
  // cpu-tier attention blocks, 32.0-32.5 tok/s against 26.5-27.3 plain, README); a batch or a
  // server is planned for the sequences it steps together (RunShape::decode_rows). Before that it
  // was off: predicted at 48.1 tok/s, the first placement ran at 32.0. kv_host stays opt-in.
  std::string cpu_blocks = "auto";
  std::string kv_host = "none";
  std::string trace_path;  // where Session::write_trace() puts the trace; empty: no trace
  // Speculative decoding (spec/spec_config.h). Parsed against the model's layer count when the
  // model is opened, before anything is planned, so the plan knows the draft depth.
  std::string spec = "none";
  uint32_t draft_max = 8;
  // --draft-window: off | auto | SINKS,RECENT (spec/draft_window_config.h; auto: the default).
  std::string draft_window = "auto";
  // The plan must keep spec's draft path resident (offload::RunShape::require_draft_resident),
  // even where the planner predicts it slower: measuring a drafter on the placement it wants.
  bool require_draft_resident = false;

  // K and V types after defaults. Error: a name other than f32, f16, q8 (q8_0), q4 (q4_1).
  Result<std::pair<GgmlType, GgmlType>> kv_types() const;
  // Whether the engine will be the CUDA one: a VRAM budget, --device cuda, or auto with a GPU
  // present (Session::open_engine's choice, made here for the defaults that depend on it).
  bool uses_gpu() const;
  // cpu_blocks as the planner takes it. Error: not auto, on or off.
  Result<offload::CpuBlocks> cpu_blocks_mode() const;
  // cpu_matmul resolved for this run (resolve_cpu_int8).
  Result<bool> cpu_int8() const;
  // kv_host as the planner takes it: nullopt = the planner decides; else a layer count
  // (offload::kAllKvLayers for all). Error: not none, auto, all or a number.
  Result<std::optional<uint32_t>> kv_host_layers() const;
  // Caps oneTBB's worker count at `threads` for the lifetime of the returned object.
  std::unique_ptr<tbb::global_control> thread_limit() const;
};

}  // namespace strata::session
