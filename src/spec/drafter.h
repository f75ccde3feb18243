// A drafter proposes the tokens that follow the sequence; the full model then checks them all in
// one batched pass (speculative_decoder.h). Drafters here are deterministic (greedy), so the
// verifier's rejection sampling treats the draft distribution as one-hot.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace strata::spec {

struct Draft {
  std::vector<int32_t> tokens;  // the proposed continuation (empty: nothing to propose)
  // Layer verification starts at (0: the embedding). When > 0, hidden holds the residual stream
  // entering that layer for the pending token and each drafted token: (1 + tokens.size(), n_embd).
  uint32_t verify_from = 0;
  std::vector<float> hidden;
  uint32_t engine_steps = 0;  // forward passes the draft cost (0 for prompt lookup)
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
};

}  // namespace strata::spec
