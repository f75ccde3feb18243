#include "batch/chunking.h"

#include <algorithm>

namespace strata::batch {

Result<std::vector<Span>> plan_chunks(uint32_t n_tokens, uint32_t chunk_tokens, uint32_t overlap) {
  if (chunk_tokens == 0) return Status::error("map-reduce: no room for a document chunk in the context (raise -c or lower max_tokens)");
  if (overlap >= chunk_tokens)
    return Status::error("map-reduce: overlap {} must be smaller than the chunk of {} tokens", overlap, chunk_tokens);
  std::vector<Span> spans;
  uint32_t begin = 0;
  while (begin < n_tokens) {
    const uint32_t end = uint32_t(std::min<uint64_t>(uint64_t(begin) + chunk_tokens, n_tokens));
    spans.push_back({begin, end});
    if (end == n_tokens) break;
    begin = end - overlap;  // > previous begin because overlap < chunk_tokens
  }
  return spans;
}

}  // namespace strata::batch
