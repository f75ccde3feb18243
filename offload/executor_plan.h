// The planning call the programs make for a VRAM budget (`--vram 12GiB`): the model's blocks, the
// plan, and what the executor runs (the plan's Placement, ring slots, the arena's and the pinned
// pool's budgets).
//
// The executor runs every tier the planner knows: gpu, stream, disk, cpu (weights in host RAM,
// matmuls on the CPU) and host KV (attention on the CPU). Which of the host-side tiers a plan may
// use is the caller's choice (Budgets::allow_cpu / allow_host_kv): host KV stays behind --kv-host;
// the cpu tier behind `--cpu-blocks off|on|auto` (off by default, session/run_options.h says why;
// auto: taken where the plan predicts a clear gain, plan_with_cpu_tier).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "model/gguf_file.h"
#include "model/model_spec.h"
#include "offload/hardware_profile.h"
#include "offload/model_blocks.h"
#include "offload/planner.h"

namespace strata::offload {

struct ExecutorPlan {
  ModelBlocks blocks;
  HardwareProfile profile;
  Budgets budgets;
  RunShape shape;
  Plan plan;
  // What the engine gets: its arena's budget (the VRAM budget less the profile's CUDA context, the
  // driver's share of a real card of that size), the pinned pool's, and the staging ring's slots.
  uint64_t engine_vram_budget = 0;
  uint64_t pinned_budget = 0;
  uint32_t ring_slots = 2;
};

// `--kv-host N`: the deepest N full-attention layers keep their KV in host RAM whatever the planner
// chose (kAllKvLayers: all of them; 0: none). Sliding-window layers' rings always stay in VRAM.
inline constexpr uint32_t kAllKvLayers = UINT32_MAX;

// Plans the model under `budgets` (allow_cpu / allow_host_kv as the caller sets them).
// kv_host_layers: when set, the weights are planned with KV in VRAM and then that many
// full-attention layers' KV is moved to host RAM (the same weight placement either way, so a
// benchmark compares only where the KV lives); the plan is re-evaluated, and an error says when the
// host budget cannot take it.
Result<ExecutorPlan> plan_for_executor(const gguf::File& file, const model::ModelSpec& spec, HardwareProfile profile,
                                       Budgets budgets, RunShape shape,
                                       std::optional<uint32_t> kv_host_layers = std::nullopt);

// Whether weight blocks that do not fit the VRAM budget may be computed where they lie in host RAM
// (Tier::cpu) rather than streamed over PCIe at each step: `--cpu-blocks off|on|auto`.
enum class CpuBlocks : uint8_t { off, on, automatic };
// "off", "on" or "auto". Error (naming --cpu-blocks): any other name.
Result<CpuBlocks> cpu_blocks_from_name(const std::string& name);
const char* cpu_blocks_name(CpuBlocks c);

// The least relative gain of the predicted objective (Prediction::objective_tps) for which
// `--cpu-blocks auto` computes blocks on the CPU. Why a margin: the cpu tier's rates are the least
// certain inputs of the cost model (the detected profile measures them in a fraction of a second at
// start-up; M17 measured an earlier cpu tier at 34% of its prediction), and a cpu-tier block costs
// what the decode step does not show: the CPU is busy for the whole run, and prefill can no longer
// go layer-major (cost_model.h layer_major_prefill). A plan predicted barely faster is not worth it.
inline constexpr double kCpuTierMinGain = 0.05;

// plan_for_executor with the cpu tier as `mode` says (it sets budgets.allow_cpu):
// - off / on: one plan, allow_cpu false / true;
// - automatic: two plans, allow_cpu false and true, all else the same. The cpu-tier one is taken
//   when it computes at least one block on the CPU and either its objective is at least
//   kCpuTierMinGain above the other's or the other does not fit the budgets; else the other. When
//   neither fits, the error is the cpu-tier plan's (its suggestions count the cpu tier).
// Plan::cpu_tier_choice says what was decided and why (the report's "cpu tier:" line); it stays
// empty with off, and wherever every weight block is resident in VRAM.
Result<ExecutorPlan> plan_with_cpu_tier(CpuBlocks mode, const gguf::File& file, const model::ModelSpec& spec,
                                        const HardwareProfile& profile, const Budgets& budgets,
                                        const RunShape& shape, std::optional<uint32_t> kv_host_layers = std::nullopt);

// The placement with the deepest `n` full-attention layers' KV (all when n exceeds their count)
// in host RAM and every other layer's in VRAM.
void place_kv_host(const ModelBlocks& blocks, uint32_t n, Placement& placement);

}  // namespace strata::offload
