// A drafter proposes the tokens that follow the sequence; the full model then checks them all in
// one batched pass (speculative_decoder.h). Drafters here are deterministic (greedy), so the
// verifier's rejection sampling treats the draft distribution as one-hot.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "spec/tree_plan.h"

namespace strata::spec {

struct Draft {
  std::vector<int32_t> tokens;  // the proposed continuation (empty: nothing to propose)
  // Layer verification starts at (0: the embedding). When > 0, hidden holds the residual stream
  // entering that layer for the pending token and each drafted token: (1 + tokens.size(), n_embd).
  uint32_t verify_from = 0;
  std::vector<float> hidden;
  uint32_t engine_steps = 0;  // forward passes the draft cost (0 for prompt lookup)
  bool windowed = false;      // drafted through a draft window (draft_window_config.h): verify_from is 0
};

// A drafted token tree (runtime/token_tree.h has the engine's rules; speculative_decoder.h how it
// is verified, greedy or sampled).
// Node 0 is the pending token; nodes are in level order (every node of depth k before any of
// depth k + 1), parents first, as Engine::eval_tree runs them.
struct TreeDraft {
  std::vector<int32_t> tokens;   // node i's token; tokens[0] is the pending token
  std::vector<int32_t> parents;  // parents[0] = -1
  std::vector<uint32_t> rank;    // node i's rank among its siblings (tree_plan.h)
  uint32_t verify_from = 0;      // as Draft's; hidden: (tokens.size(), n_embd) when > 0
  std::vector<float> hidden;
  uint32_t engine_steps = 0;
  bool windowed = false;         // as Draft's
  // Per draft pass (a level of the tree): its node count and seconds, where the drafter timed them
  // (the decoder fits the cost of a level against its width: speculative_decoder.h).
  struct LevelCost {
    uint32_t nodes = 0;
    double seconds = 0;
  };
  std::vector<LevelCost> levels;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string_view name() const = 0;
  // Proposes up to k tokens to follow `history` (prompt + generated). Its last token is the
  // pending one: sampled, not yet evaluated, at engine position n_past(). A drafter may write KV
  // of positions >= n_past() ahead (early exit: layers < d; layer subset: the layers it runs)
  // but never moves n_past(); verification overwrites it from layer verify_from on.
  virtual Status propose(std::span<const int32_t> history, uint32_t k, Draft& out) = 0;
  // Token trees: fills the planned nodes it can (tree_plan.h; a node may be left out, with its
  // subtree, where the drafter has no candidate for it). Drafters without trees refuse.
  virtual bool drafts_trees() const { return false; }
  virtual Status propose_tree(std::span<const int32_t> history, const TreePlan& plan, TreeDraft& out) {
    (void)history, (void)plan, (void)out;
    return Status::error("the {} drafter proposes chains only", name());
  }
};

}  // namespace strata::spec
