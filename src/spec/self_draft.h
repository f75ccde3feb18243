// The greedy loop both self-drafters run (early exit: layers [0, d); layer subset: the model with
// a skip mask): the model's own passes propose tokens one at a time ahead of n_past.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "runtime/engine.h"
#include "spec/drafter.h"

namespace strata::spec {

// The drafters' confidence cut: whether `token` has softmax probability >= min_p, `top` being the
// row's argmax. Cheaper than the probability itself, which costs an exp per vocabulary entry (~1
// ms a draft step for a 262K vocabulary, as much as the resident layers' GPU time): the sum of
// exp(l - l_top) stops once it passes the bound the answer needs (a flat row: after a few terms),
// and terms below e^-30 are skipped (together < 1e-6 of the sum, which is >= 1, for any vocabulary
// under 10 million), so a confident row costs about a comparison per entry.
bool has_probability(std::span<const float> logits, int32_t top, int32_t token, float min_p);

// Step i runs token x_i (`pending` at position n_past, then each draft) through the pass range(i)
// describes, at position n_past + i, and takes the head's argmax as the next draft. Stops after k
// drafts, or before a draft whose probability is below min_confidence (0: never). Appends the
// drafts to out.tokens and counts the passes in out.engine_steps; `logits` is scratch.
Status draft_greedily(runtime::Engine& engine, int32_t pending, uint32_t k, float min_confidence,
                      const std::function<runtime::LayerRange(uint32_t step)>& range, std::vector<float>& logits,
                      Draft& out);

}  // namespace strata::spec
