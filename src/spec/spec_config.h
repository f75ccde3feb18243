// `--spec` and `--draft-max`: which drafter speculative decoding uses and how far it drafts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/ggml_type.h"
#include "core/status.h"
#include "spec/draft_window_config.h"

namespace strata::spec {

// replay: `strata bench spec --replay` only (spec/replay.h; parse_spec never yields it).
enum class SpecMode { none, early, subset, shadow, lookup, automatic, replay };

struct SpecConfig {
  SpecMode mode = SpecMode::none;
  uint32_t depth = 0;      // early-exit depth d (early, automatic): layers [0, d) draft
  uint32_t draft_max = 8;  // tokens drafted per round at most: 1 .. kMaxExactRows - 1
  // Early exit stops drafting before a token its head gives less than this probability.
  float min_confidence = 0.2f;
  // Layer subset: the fraction of the middle layers skipped; 0 lets the chooser pick among
  // kDefaultSkipRatios (subset_chooser.h). auto uses the chooser's candidates.
  double skip_ratio = 0;
  // Shadow drafts (spec/shadow_draft.h): the type of the low-bit copies of every layer's matrices.
  // q2_K by default: every row length of the supported models divides into its 256-element
  // blocks, it has int8 CPU and GPU kernels, and it needs no importance matrix (IQ2_XS without
  // one loses far more, iq_quant.h).
  GgmlType shadow_type = GgmlType::Q2_K;
  // Token trees (early exit, greedy or sampled): at most this many children per node, up to
  // kMaxExactRows nodes with the pending token, depth <= draft_max, shape from the measured
  // acceptance per (depth, rank) (tree_plan.h). 0: chains. Engines without trees
  // (Engine::supports_trees) verify chains instead.
  uint32_t tree = 0;
  // Trees stop where more nodes would lower the measured tokens per second (tree_plan.h
  // best_tree_size, once a verify pass is timed; at least the first draft, so acceptance keeps
  // being measured). false: always fill the node budget (tests that want the largest trees).
  bool tree_fit_cost = true;
  // SpecMode::replay chains: false drafts draft_max tokens every round (speed at a fixed draft
  // length); true chooses each round's length as auto does for one drafter -- the k whose expected
  // tokens per second beat a plain step's, else a plain step, with probes -- from the replay's
  // measured acceptance and costs (`bench spec --replay-policy auto`: whether auto backs off at
  // low acceptance).
  bool replay_auto = false;
  // `--draft-window`: the self-drafters' attention window on full-attention layers (not part of
  // text(): the spec report names it apart).
  DraftWindowConfig window = {};
  // as given to --spec: "none", "early:d=8", "early:d=8,tree=2", "subset", "subset:skip=0.5",
  // "shadow:q2_K", "lookup", "auto:d=8"
  std::string text() const;
};

// The early-exit depth used when --spec gives none: two thirds of the layers (LayerSkip-style
// training puts an exit there; strata-tiny's is after layer 8 of 12).
uint32_t default_depth(uint32_t n_layer);

// "none" | "early[:d=N][,tree=B]" (or "early:tree=B") | "subset[:skip=R]" | "shadow[:TYPE]" | "lookup" |
// "auto[:d=N]". TYPE: a GGML type strata quantises to (q2_k, q3_k, iq3_xxs, ...).
// Errors are one line naming the flag: unknown mode, d outside [1, n_layer), B outside [1, 8],
// R outside (0, 1), subset on a model of fewer than 3 layers (it keeps the first and last), an
// unknown shadow type,
// draft_max outside [1, 15].
Result<SpecConfig> parse_spec(std::string_view text, uint32_t draft_max, uint32_t n_layer);

}  // namespace strata::spec
