// The two-ended staging ring: two streamed blocks in flight sharing one VRAM buffer sized for the
// largest pair of neighbours in the streaming order, instead of two slots each as large as the
// largest block.
//
// Why: with a prefetch depth of 1 the ring holds the block being computed and the next one. Fixed
// slots make each as large as the largest streamed block, so a placement that streams FFN blocks
// (142 MiB in the 27B-shaped model) beside attention blocks (33 MiB) reserved 2 x 142 MiB, although
// at no time were two FFN blocks in VRAM unless two were neighbours in the order. A speculative
// plan, whose draft path pins the early layers' FFN blocks and leaves FFN blocks to stream, paid
// that (~110 MiB more streamed per step, measured planner output: session 30's note, M12).
//
// Layout: slot 0 of the two-slot ring is bottom-aligned at the buffer's start, slot 1 top-aligned
// at its end (address = end - block bytes). Consecutive uses alternate slots, so two neighbours
// occupy disjoint bytes whenever their sizes add up to at most the buffer; the executor
// (weight_store.cpp) copies a use whose neighbour does not fit only after that neighbour's release
// (correct, serialised: e.g. a prefill order that also streams cpu-tier blocks, or a draft pass
// whose order wraps differently).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

namespace strata::offload {

// Bytes a two-ended ring needs for a schedule that repeats `order` (block sizes in streaming order):
// the largest sum of cyclic neighbours (the last block's neighbour is the first, as the next step
// begins), a lone block with itself (its next use is its own). 0 for an empty order.
inline uint64_t shared_ring_bytes(std::span<const uint64_t> order) {
  uint64_t need = 0;
  for (size_t i = 0; i < order.size(); ++i) need = std::max(need, order[i] + order[(i + 1) % order.size()]);
  return need;
}

// On by default (planner and executor alike); STRATA_SHARED_RING=0 keeps two slots of the largest
// block (read once per process). Measured (H100, 27B q3_K_M synth, `bench spec --vram 12GiB -c 4096
// --modes none --replay 0.5,0.7 --replay-cost early:d=16`, two rounds, off -> on): staging 284 ->
// 173 MiB, 2.11 -> 1.97 GiB streamed per step; plain 23.00 -> 24.52 and 22.64 -> 23.95 tok/s, verify
// 48.8 -> 46.3 and 47.4 -> 44.5 ms, A = 0.7 48.1 -> 49.7 and 49.2 -> 51.8 tok/s.
bool shared_ring_default();

}  // namespace strata::offload
