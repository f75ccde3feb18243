// The planning call the programs make for a VRAM budget (`--vram 12GiB`): the model's blocks, the
// plan, and what the executor runs (the plan's Placement, ring slots, the arena's and the pinned
// pool's budgets).
//
// The executor runs every tier the planner knows: gpu, stream, disk, cpu (weights in host RAM,
// matmuls on the CPU) and host KV (attention on the CPU). Which of the host-side tiers a plan may
// use is the caller's choice (Budgets::allow_cpu / allow_host_kv): the CLI keeps them behind
// flags until they are measured on the GPU machine, so a plain `--vram` run plans as before.
#pragma once

#include <cstdint>
#include <optional>

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

// The placement with the deepest `n` full-attention layers' KV (all when n exceeds their count)
// in host RAM and every other layer's in VRAM.
void place_kv_host(const ModelBlocks& blocks, uint32_t n, Placement& placement);

}  // namespace strata::offload
