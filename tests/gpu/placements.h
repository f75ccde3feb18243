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

}  // namespace strata::test
