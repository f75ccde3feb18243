// Self-speculative decoding over one Engine: a drafter proposes k tokens, one batched pass of
// the full model (Engine::eval_layers, every row computed as a decode step computes it) scores
// the pending token and the k drafts, and the verifier keeps the longest acceptable prefix plus
// one token of its own; truncate() rolls the rejected positions back in every layer.
//
// Exactness. Greedy: a draft token is accepted iff it is the target's choice (the sampler's
// argmax after its repetition penalty), so the text is bit-identical to plain greedy decoding.
// Sampling: standard speculative rejection sampling with a deterministic drafter (q one-hot):
// accept draft x with probability p(x), else draw from p with x removed, renormalised, which
// is norm(max(0, p - q)); every emitted token is distributed exactly as the sampler's p.
//
// `auto` (SpecMode::automatic) picks, each round, the option with the highest predicted rate
//   tokens per second = expected_tokens(a, k) / (draft cost + t_verify(k + 1))
// over: plain decoding (k = 0, rate 1 / t_plain); prompt lookup when it has a continuation
// (draft cost 0, k up to the continuation's length; continuations of one-token matches have
// their own acceptance estimate, prior 0.3, apart from longer matches'); early exit for k = 1..draft_max (draft cost
// (k + 1) t_step: k drafts plus the last one's pass to layer d); layer subset for k =
// 1..draft_max with the subset chooser's best skip set (draft cost k t_step(set), verification
// from layer 0; when subset wins the round, the chooser's policy picks the set actually run, so
// it explores only in rounds given to it). a is each drafter's (each skip set's) running
// acceptance, t_* the running measured costs (adaptive.h; before a cost is measured it is
// derived from the plain step by layer fraction). A drafter not chosen for 32 rounds gets one
// probe round of 2 tokens, and plain decoding one plain step, so that a stale estimate can
// recover; each probe an option loses doubles its interval (up to 1024 rounds), and winning on
// its rate resets it, so options that never pay stop costing probes.
//
// Token trees (`early:d=N,tree=B`): each round plans a tree (tree_plan.h: up to B
// children per node, kMaxExactRows nodes with the pending token, depth <= draft_max, shape from
// the measured acceptance per depth and rank), drafts it level by level with layers [0, d)
// (one pass per level), verifies every node in one Engine::eval_tree pass from layer d, walks
// from the root taking the child whose token is the target's choice, emits that path plus the
// target's next token, and keeps the path's KV (Engine::keep_tree_path). The target's choice is
// its argmax (greedy) or a draw from its sampling distribution with the sampler's own generator,
// one draw per emitted token: the text is plain decoding's, token for token, with the same seed.
// Engines without trees verify chains (sampled chains: speculative rejection sampling).
//
// Draft window (`--draft-window`, draft_window_config.h): at long context the self-drafters'
// rounds attend through sinks + recent positions on full-attention layers; such a round is
// verified from layer 0 with full attention (auto then costs early exit as k passes plus a full
// verification), so the text is plain decoding's either way. Dropped where the engine cannot
// (Engine::supports_draft_window).
//
// `subset` drafts k = draft_max tokens each round (fewer when the draft's head is unsure) with
// the skip set the chooser picks (subset_chooser.h: candidates, exploration budget, settling).
// `shadow[:TYPE]` drafts draft_max tokens each round with every layer's low-bit copy
// (shadow_draft.h; create() makes the engine's copies, an error where the engine keeps none),
// verification from layer 0.
//
// Not thread-safe; one sequence. The engine and sampler must outlive the decoder.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "spec/adaptive.h"
#include "spec/depth_stats.h"
#include "spec/drafter.h"
#include "spec/spec_config.h"
#include "spec/subset_chooser.h"
#include "spec/tree_plan.h"

namespace strata::spec {

// One skip set of the layer-subset drafter.
struct ArmStats {
  std::string label;         // SkipSet::label
  uint64_t rounds = 0, drafted = 0, accepted = 0;
  double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
};

struct DrafterStats {
  std::string name;
  uint64_t rounds = 0;       // verify passes with this drafter's tokens
  uint64_t drafted = 0;      // tokens proposed
  uint64_t accepted = 0;     // of which accepted
  uint64_t tokens = 0;       // emitted by those verify passes (accepted + the verifier's own)
  uint64_t steps = 0;        // forward passes drafting cost (0 for lookup)
  uint64_t tree_rounds = 0, tree_nodes = 0;  // token-tree rounds and their nodes (pending token included)
  double draft_s = 0;        // time drafting
  double verify_s = 0;       // time in those verify passes
  DepthStats by_depth = {};         // acceptance per draft depth (depth_stats.h)
  std::vector<ArmStats> arms = {};  // layer subset: per skip set
  std::string chosen = {};         // layer subset: the skip set rated best at the end
  uint64_t windowed_rounds = 0;    // of `rounds`, those drafted through the draft window (verified from layer 0)
  double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  double tokens_per_verify() const { return rounds ? double(tokens) / double(rounds) : 0.0; }
  double mean_accepted() const { return rounds ? double(accepted) / double(rounds) : 0.0; }  // per verify pass
};

struct SpecStats {
  std::string spec;          // SpecConfig::text()
  std::string draft_window;  // DraftWindowConfig::text() as run ("off" where the engine cannot)
  uint64_t tokens = 0;       // generated after the first (the first comes from the prompt's logits)
  uint64_t plain_steps = 0;  // one-token eval() steps (spec none, or auto choosing no draft)
  double plain_s = 0;
  uint64_t verify_passes = 0, verify_rows = 0;
  double verify_s = 0;
  double decode_s = 0;       // wall time of every step() (drafting, verification, sampling)
  std::vector<DrafterStats> drafters;
  double tokens_per_s() const { return decode_s > 0 ? double(tokens) / decode_s : 0.0; }
  // Against the plain steps this run took (auto takes some): tokens_per_s x plain step time;
  // 0 when none was measured. `strata bench spec` measures plain decoding in full instead.
  double speedup_vs_plain_steps() const;
  nlohmann::json to_json() const;
  std::string summary() const;  // one line per drafter after a headline
};

class SpeculativeDecoder {
 public:
  // Errors: the config's depth beyond the engine's model, draft_max beyond the engine's ubatch.
  static Result<std::unique_ptr<SpeculativeDecoder>> create(runtime::Engine& engine, runtime::Sampler& sampler,
                                                            SpecConfig config);
  // A decoder whose every round drafts draft_max tokens with `drafter` (the replay drafter of
  // `bench spec --replay`, spec/replay.h): mode SpecMode::replay, stats named after the drafter.
  // tree > 0: token trees of up to `tree` children per node, as `early:d=N,tree=B` (the
  // drafter must draft trees). adaptive: chains choose their length by auto's rule (SpecConfig
  // replay_auto) instead of drafting draft_max tokens every round.
  static Result<std::unique_ptr<SpeculativeDecoder>> create_with(runtime::Engine& engine, runtime::Sampler& sampler,
                                                                 uint32_t draft_max, std::unique_ptr<Drafter> drafter,
                                                                 uint32_t tree = 0, bool tree_fit_cost = true,
                                                                 bool adaptive = false);

  // Evaluates the prompt (engine at position 0) and samples the first token, which becomes the
  // pending one; returns it.
  Result<int32_t> start(std::span<const int32_t> prompt);
  // Continues a sequence decoded elsewhere instead of start() (the server's prefill and its
  // batched steps): `history` is prompt + generated, its last token the pending one at position
  // engine.n_past() (== history.size() - 1), every token already accepted by the sampler.
  void resume(std::span<const int32_t> history) { history_.assign(history.begin(), history.end()); }
  // One round: appends 1 .. max_new tokens to `out` (each already accepted by the sampler).
  // Errors: engine failure; context full (no room for the pending token).
  Status step(uint32_t max_new, std::vector<int32_t>& out);
  // With keep: each step() also keeps the target model's logits, before the sampler (which may
  // change them in place), of every token it emitted: row i (n_vocab floats) is the distribution
  // the step's i-th token was drawn or verified from (the server's logprobs).
  void keep_raw_logits(bool keep) { keep_raw_ = keep; }
  // The clock that times passes for auto's costs (seconds; default the steady clock). Tests give a
  // modelled one so that the choices follow modelled costs, not a loaded machine's timings.
  void set_clock(std::function<double()> seconds) { clock_ = std::move(seconds); }
  std::span<const float> raw_logits() const { return raw_logits_; }

  const SpecStats& stats() const { return stats_; }
  const std::vector<int32_t>& history() const { return history_; }  // prompt + generated

 private:
  SpeculativeDecoder(runtime::Engine& engine, runtime::Sampler& sampler, SpecConfig config,
                     std::unique_ptr<Drafter> given = nullptr);
  struct Choice {
    int drafter = -1;  // index into drafters_; -1: a plain step
    uint32_t k = 0;
    std::vector<int32_t> lookup;  // lookup's continuation, when chosen
    bool short_match = false;     // lookup from a one-token match (its own acceptance estimate)
    bool probe = false;           // chosen to refresh a stale estimate, not on its predicted rate
  };
  Choice choose(uint32_t k_max);
  Choice choose_replay(uint32_t k_max);  // SpecMode::replay with replay_auto
  // Probes (choose's rule): the option chosen on its rate gets its probe interval reset; a probe
  // round doubles the interval of the option it probes (-1: a plain step).
  void won_on_rate(const Choice& c);
  Choice probe_round(int drafter, uint32_t k, bool short_match);
  // Measured (or, before any measurement, derived) costs the choices weigh.
  double t_plain() const;
  double t_verify_full(uint32_t rows) const;
  // Verification from the early-exit depth, and one early-exit draft step (measured, else derived
  // from the plain step by layer fraction).
  double t_verify_early(uint32_t rows) const;
  double t_draft_step() const;
  double t_draft_level(uint32_t nodes) const;  // draft_level_cost_, else t_draft_step()
  // Whether no CUDA graph was captured since the engine's count was `before`: a pass that
  // captured one (graphs are keyed by row or node count, so each new tree size captures once) took
  // a one-time cost, and the cost fits skip it. Unskipped, the first (16-node) tree verify, alone
  // in the fit, set the slope from its inflated time and replayed trees on the 27B under --vram
  // 12GiB shrank to 3-7 nodes, below the best size at every acceptance.
  bool steady(uint64_t before) const { return engine_.graph_captures() == before; }
  // Picks the skip set for a subset round of k drafts and hands it to the drafter.
  void pick_subset_arm(uint32_t k);
  Status plain_step(std::vector<int32_t>& out);
  Status verify(int drafter, const Draft& d, std::vector<int32_t>& out);
  // Token trees: whether this round drafts one, and the round itself (max_depth: k_max).
  bool tree_round_for(int drafter) const;
  Status tree_round(int drafter, uint32_t max_depth, std::vector<int32_t>& out);
  Status verify_tree(int drafter, const TreeDraft& t, std::vector<int32_t>& out);

  runtime::Engine& engine_;
  runtime::Sampler& sampler_;
  SpecConfig cfg_;
  Rng rng_;
  std::vector<std::unique_ptr<Drafter>> drafters_;
  int early_ = -1, lookup_ = -1, subset_ = -1, shadow_ = -1;  // indices into drafters_
  std::unique_ptr<SubsetChooser> chooser_;        // when subset_ >= 0
  size_t subset_arm_ = 0;                         // the skip set of the current subset round
  std::vector<AcceptanceEstimate> accept_;
  // auto: one-token lookup matches are frequent and often wrong, so their acceptance is estimated
  // apart from longer matches' (prior 0.3) instead of being ignored.
  AcceptanceEstimate accept_short_lookup_{0.3};
  bool round_short_lookup_ = false;  // the current round drafts from a one-token match
  std::vector<uint32_t> idle_rounds_;
  uint32_t plain_idle_rounds_ = 0;
  // Rounds an option may sit unused before a probe; doubles after each probe it loses (up to
  // kMaxProbeInterval), back to the start when it wins on its rate: a drafter that never pays (an
  // early exit slower than a graphed plain step) stops costing a probe every 32 rounds.
  std::vector<uint32_t> probe_after_;
  uint32_t plain_probe_after_ = 0;
  CostEstimate plain_cost_{0.0}, draft_step_cost_{0.0};
  CostEstimate verify_cost_full_, verify_cost_early_;  // verification from layer 0 / from depth d
  // A tree's draft pass (a level) against its node count: wider levels cost more columns and a
  // vocabulary pass per node (H200, 27B at --vram 12GiB: ~2.5 ms for one node, ~3.5 for two).
  // Prior slope 0.3 of a pass per extra node until levels of two widths are timed.
  CostEstimate draft_level_cost_{0.3};
  // Tree rounds since the last exploring one. A verify pass costs a concave function of its nodes
  // on the GPU (one node to a few: a different kernel; a few to 16: nearly flat), so a line fitted
  // to the sizes chosen so far over-predicts larger trees, and the sizes would never grow to check.
  // Every kTreeExploreInterval-th round drafts twice the chosen size.
  uint32_t tree_rounds_since_explore_ = 0;
  static constexpr uint32_t kTreeExploreInterval = 8;
  std::vector<int32_t> history_;
  std::vector<float> logits_;
  std::function<double()> clock_;
  double now() const { return clock_ ? clock_() : steady_seconds(); }
  static double steady_seconds();
  bool keep_raw_ = false;
  std::vector<float> raw_logits_;  // keep_raw_: the last step's rows, one per emitted token
  Draft draft_;
  std::unique_ptr<TreeShaper> shaper_;  // token trees (cfg_.tree > 0)
  TreeDraft tree_;
  SpecStats stats_;
};

}  // namespace strata::spec
