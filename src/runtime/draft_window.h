// A drafter's attention window (M12; StreamingLLM / MagicDec / TriForce): on full-attention
// layers a draft pass attends to the first `sinks` positions and the last `recent` ones instead of
// the whole context, so a draft step's cost stops growing with the context. Sliding-window
// layers keep their own window (it is already short, and their ring stores no longer hold the
// first positions). Verification always attends to everything: a windowed pass writes KV computed
// from windowed attention, so the engine treats it like a skip mask (engine.h LayerRange).
#pragma once

#include <compare>
#include <cstdint>

#include "kernels/cpu/attention.h"

namespace strata::runtime {

struct DraftWindow {
  uint32_t sinks = 0;   // first positions always seen (attention sinks)
  uint32_t recent = 0;  // last positions seen, the query's own included; 0: no window
  bool on() const { return recent > 0; }
  // Whether a query at position `pos` sees fewer keys than full causal attention would.
  bool cuts(uint32_t pos) const { return on() && uint64_t(pos) + 1 > uint64_t(sinks) + recent; }
  // The attention of layer `shape` (its own window: sliding, or 0 for a full-attention layer) in a
  // pass with this window: full-attention layers get sinks + recent, the others are unchanged.
  kernels::cpu::AttentionShape apply(kernels::cpu::AttentionShape shape) const {
    if (on() && shape.window == 0) shape.window = recent, shape.sinks = sinks;
    return shape;
  }
  auto operator<=>(const DraftWindow&) const = default;
};

}  // namespace strata::runtime
