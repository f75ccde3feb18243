// What a CUDA graph of one engine step depends on besides its inputs: the step's shape. Two steps
// of equal shape enqueue the same kernels with the same arguments (positions and tokens are read
// from device buffers, the KV stores and weight slots are fixed per shape), so one captured graph
// replays every step of that shape. cuda_step_graphs.cpp keys its graphs by it.
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

#include "runtime/draft_window.h"

namespace strata::runtime {

struct StepShape {
  uint32_t n = 0;                   // rows (tokens) in the step
  uint32_t first = 0, end = 0;      // layers [first, end) run
  uint32_t logit_rows = 0;          // rows that get logits (the last ones)
  bool store_hidden = false;        // the residual stream after end - 1 goes back to the caller
  std::vector<uint8_t> skip;        // layers skipped (layer-subset drafts); empty: none
  DraftWindow window;               // a draft's attention window: the kernels' window and sinks are
                                    // launch arguments, so a windowed step never replays a graph
                                    // captured without it (or with another), nor the reverse
  std::vector<uint32_t> seqs;       // each row's sequence: whose KV store its write and attention use
  bool tree = false;                // eval_tree: its rows' paths, path lengths and positions are
                                    // device inputs, so the tree's shape is not part of the key
  bool warm = false;                // streamed plans: the weight ring holds the step's first blocks
  auto operator<=>(const StepShape&) const = default;
};

}  // namespace strata::runtime
