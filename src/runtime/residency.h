// From a placement plan (offload/planner.h) to the CUDA engine's Residency, and the planning call
// the programs make when the user gives a VRAM budget (`--vram 12GiB`).
//
// The executor runs every tier the planner knows: gpu, stream, disk, cpu (weights in host RAM,
// matmuls on the CPU) and host KV (attention on the CPU). Which of the host-side tiers a plan may
// use is the caller's choice (Budgets::allow_cpu / allow_host_kv): the CLI keeps them behind
// flags until they are measured on the GPU machine, so a plain `--vram` run plans as before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "offload/hardware_profile.h"
#include "offload/model_blocks.h"
#include "offload/planner.h"
#include "runtime/engine.h"
#include "runtime/model.h"

namespace strata::runtime {

struct ExecutorPlan {
  offload::ModelBlocks blocks;
  offload::HardwareProfile profile;
  offload::Budgets budgets;
  offload::RunShape shape;
  offload::Plan plan;
  Residency residency;
};

// `--kv-host N`: the deepest N full-attention layers keep their KV in host RAM whatever the planner
// chose (kAllKvLayers: all of them; 0: none). Sliding-window layers' rings always stay in VRAM.
inline constexpr uint32_t kAllKvLayers = UINT32_MAX;

// Plans `model` under `budgets` (allow_cpu / allow_host_kv as the caller sets them). The engine's
// arena gets the VRAM budget minus the profile's CUDA context (the driver's share of a real card
// of that size). kv_host_layers: when set, the weights are planned with KV in VRAM and then that
// many full-attention layers' KV is moved to host RAM (the same weight placement either way, so a
// benchmark compares only where the KV lives); the plan is re-evaluated, and an error says when
// the host budget cannot take it.
Result<ExecutorPlan> plan_for_executor(const Model& model, offload::HardwareProfile profile, offload::Budgets budgets,
                                       offload::RunShape shape, std::optional<uint32_t> kv_host_layers = std::nullopt);

// The placement with the deepest `n` full-attention layers' KV (all when n exceeds their count)
// in host RAM and every other layer's in VRAM.
void place_kv_host(const offload::ModelBlocks& blocks, uint32_t n, offload::Placement& placement);

// Maps tiers: gpu -> resident, stream -> streamed, disk -> streamed + disk, cpu -> cpu; KvTier::host
// -> kv_host. Error: a plan whose vectors do not have one entry per layer.
Result<Residency> residency_from_plan(const offload::Plan& plan, uint64_t vram_budget, uint64_t pinned_budget);

}  // namespace strata::runtime
