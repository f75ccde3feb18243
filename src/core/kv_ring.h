// The one rule for how many KV slots a layer keeps (every engine, the planner and the KV caches
// size by it). A full-attention layer keeps every position of the context. A sliding-window layer
// keeps a ring of window + margin slots, margin = the most positions one call may write ahead of
// the sequence's length (ubatch): speculative and chunked writes never overwrite a key that a query
// at the sequence's length still reads (DESIGN.md, "KV tiers"). Position p lives in slot
// p % slots (a full layer never wraps). kv/sequence_table.h holds the rules built on these two.
#pragma once

#include <algorithm>
#include <cstdint>

namespace strata {

inline uint64_t kv_ring_slots(uint32_t window, uint64_t n_ctx, uint32_t margin) {
  return window ? std::min<uint64_t>(n_ctx, uint64_t(window) + margin) : n_ctx;
}

inline uint32_t kv_ring_slot(uint32_t pos, uint32_t slots) { return pos % slots; }

}  // namespace strata
