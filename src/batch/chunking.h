// Map-reduce planning for documents longer than the context: where the chunks of a token
// sequence begin and end. Pure arithmetic, so the edge cases are tested without a model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace strata::batch {

struct Span {
  uint32_t begin = 0, end = 0;  // [begin, end) token indices
};

// Consecutive chunks of at most chunk_tokens covering [0, n_tokens), each starting `overlap`
// tokens before the previous one ended (so a sentence cut at a boundary is seen whole by one of
// the two summaries). Requires 0 <= overlap < chunk_tokens; n_tokens == 0 gives no chunks.
Result<std::vector<Span>> plan_chunks(uint32_t n_tokens, uint32_t chunk_tokens, uint32_t overlap);

}  // namespace strata::batch
