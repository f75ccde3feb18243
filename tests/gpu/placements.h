// Placements the GPU tests run against the resident engine (offload/placement.h).
#pragma once

#include <cstdint>

#include "offload/placement.h"

namespace strata::test {

// Odd layers' attention and FFN streamed from pinned RAM, and the head.
inline offload::Placement stream_odd_layers(uint32_t n_layer) {
  offload::Placement r;
  for (uint32_t il = 0; il < n_layer; ++il) {
    const offload::Tier t = il % 2 == 1 ? offload::Tier::stream : offload::Tier::gpu;
    r.attention.push_back(t);
    r.ffn.push_back(t);
  }
  r.head = offload::Tier::stream;
  return r;
}

// Odd layers' FFN on the cpu tier (computed on the host in decode steps), odd layers' attention
// streamed, the rest resident: host work and streaming in one step.
inline offload::Placement cpu_ffn_odd_layers(uint32_t n_layer) {
  offload::Placement r;
  for (uint32_t il = 0; il < n_layer; ++il) {
    r.attention.push_back(il % 2 == 1 ? offload::Tier::stream : offload::Tier::gpu);
    r.ffn.push_back(il % 2 == 1 ? offload::Tier::cpu : offload::Tier::gpu);
  }
  return r;
}

}  // namespace strata::test
