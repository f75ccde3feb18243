// `--draft-window SINKS,RECENT|auto|off`: when the self-drafters (early exit, layer subset, their
// trees) attend through a window on full-attention layers (runtime/draft_window.h). A round that
// drafts with a window is verified from layer 0 (engine.h), so early exit then gives up its
// residual-stream reuse: the window pays only where full attention over the context costs a
// draft step more than that.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "runtime/draft_window.h"

namespace strata::spec {

struct DraftWindowConfig {
  enum class Mode { off, fixed, automatic };
  // auto: no window below kAutoFromContext positions; from there sinks 64 + recent 4096.
  // Why 32K: gemma3-27b's 10 full-attention layers hold ~42 KiB of q8 KV per token, so at 32K a
  // draft step over two thirds of the layers reads ~0.9 GiB of KV beside ~6.5 GiB of weights; a
  // round of k + 1 such steps then reads about as much KV as early exit saves by verifying from
  // layer d (one draft step's weights), which a windowed round gives up. Below that the window
  // does not pay for early exit; above it, it does, more with every token (128K: ~3.6 GiB per
  // step, a constant ~0.1 GiB with the window). 64 sinks (StreamingLLM keeps 4; more costs nothing
  // next to 4096) and 4096 recent positions (MagicDec and TriForce draft with KV budgets of
  // 512..4096) keep acceptance close to full attention's.
  static constexpr uint32_t kAutoSinks = 64, kAutoRecent = 4096, kAutoFromContext = 32768;
  Mode mode = Mode::automatic;
  runtime::DraftWindow window = {kAutoSinks, kAutoRecent};  // fixed: as given
  static DraftWindowConfig off() { return {Mode::off, {}}; }

  // The window of a draft round whose passes reach position last_pos (the highest row of any of
  // its passes): off where the mode is off, where auto's context is not reached, or where the
  // window would cut nothing (runtime::DraftWindow::cuts) -- such a round drafts exactly as
  // without a window and keeps early exit's verification from layer d.
  runtime::DraftWindow at(uint32_t last_pos) const;
  std::string text() const;  // "off", "auto" or "SINKS,RECENT"
};

// "off" | "auto" | "SINKS,RECENT" (SINKS >= 0, RECENT >= kMaxExactRows). Errors are one line
// naming the flag.
Result<DraftWindowConfig> parse_draft_window(std::string_view text);

}  // namespace strata::spec
