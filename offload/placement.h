// Placement: where every weight block and every layer's KV lives. The planner produces it
// (offload/planner.h), the report prints it, and the executor (the CUDA engine, its weight store and
// host tiers) runs it as it is: one vocabulary from plan to engine.
//
// Tiers of a weight block (model::Block):
//   gpu    resident in VRAM;
//   stream kept in pinned host RAM, copied into a VRAM ring slot just ahead of each use;
//   disk   read from the model file (io_uring, O_DIRECT) into a pinned bounce buffer at each use, then
//          copied on like a streamed block;
//   cpu    left in the model's host mapping and computed there by the CPU for decode steps (only
//          activations cross PCIe); a prefill chunk copies it through the ring and runs it on the GPU.
// KV tier of a layer: gpu (VRAM) or host (host RAM, attention on the CPU; full-attention layers only
// in plans, sliding rings are small).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/arch.h"

namespace strata::offload {

enum class Tier : uint8_t { gpu, stream, disk, cpu };
enum class KvTier : uint8_t { gpu, host };
const char* tier_name(Tier t);
const char* kv_tier_name(KvTier t);

struct Placement {
  std::vector<Tier> attention, ffn;  // per layer; empty: every block in VRAM
  Tier head = Tier::gpu;
  std::vector<KvTier> kv;            // per layer; empty: every layer's KV in VRAM

  // The tier of a block (embedding: always gpu here; the executor decides how it gathers rows).
  Tier tier(model::Block b, uint32_t il) const {
    if (b == model::Block::head) return head;
    const auto& v = b == model::Block::attention ? attention : ffn;
    return b != model::Block::embedding && il < v.size() ? v[il] : Tier::gpu;
  }
  KvTier kv_tier(uint32_t il) const { return il < kv.size() ? kv[il] : KvTier::gpu; }
  bool any(Tier t) const;           // a weight block on tier t
  bool any_streamed() const { return any(Tier::stream) || any(Tier::disk); }
  uint32_t n_kv_host() const;       // layers whose KV is in host RAM
  bool any_kv_host() const { return n_kv_host() > 0; }
  // Error unless each per-layer vector is empty or has n_layer entries.
  Status check(uint32_t n_layer) const;
  // Every weight block on tier t and every layer's KV on kv, with full per-layer vectors (what the
  // cost model reads): all resident on the GPU, or the CPU engine's all-cpu placement.
  static Placement uniform(uint32_t n_layer, Tier t, KvTier kv) {
    Placement p;
    p.attention.assign(n_layer, t);
    p.ffn.assign(n_layer, t);
    p.head = t;
    p.kv.assign(n_layer, kv);
    return p;
  }
};

// Copies through a VRAM ring slot at each use: stream and disk blocks, and cpu blocks in prefill.
inline bool streamed(Tier t) { return t == Tier::stream || t == Tier::disk; }

}  // namespace strata::offload
