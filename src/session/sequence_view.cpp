#include "session/sequence_view.h"

#include <algorithm>
#include <cassert>

namespace strata::session {

Status SequenceView::eval(uint32_t seq, std::span<const int32_t> tokens, runtime::Logits which,
                          std::vector<float>& logits) {
  assert(seq == 0);
  return e_.eval(seq_ + seq, tokens, which, logits);
}

uint32_t SequenceView::n_past(uint32_t seq) const {
  assert(seq == 0);
  return e_.n_past(seq_ + seq);
}

void SequenceView::truncate(uint32_t seq, uint32_t n) {
  assert(seq == 0);
  e_.truncate(seq_ + seq, n);
}

Status SequenceView::eval_batch(std::span<const runtime::BatchRow> rows, std::vector<float>& logits) {
  rows_.assign(rows.begin(), rows.end());
  for (auto& r : rows_) r.seq = seq_;
  return e_.eval_batch(rows_, logits);
}

Status SequenceView::eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const runtime::LayerRange& r,
                                 runtime::Logits which, std::vector<float>& logits) {
  if (seq_ == 0) return e_.eval_layers(tokens, pos0, r, which, logits);
  const uint32_t n_layer = e_.model().spec.hp.n_layer;
  const bool full = r.first == 0 && (r.end == 0 || r.end == n_layer) && !r.hidden_out && !r.window.on() &&
                    std::ranges::none_of(r.skip, [](uint8_t s) { return s != 0; });
  if (!full || pos0 != e_.n_past(seq_))
    return Status::error("sequence {}: only sequence 0 runs partial layer ranges or writes ahead of n_past "
                         "(early-exit and layer-subset drafts)", seq_);
  if (tokens.empty()) return Status::error("eval_layers: no tokens");
  rows_.clear();
  for (int32_t t : tokens) rows_.push_back({seq_, t});
  STRATA_TRY(e_.eval_batch(rows_, logits));
  const size_t V = e_.model().spec.hp.n_vocab;
  if (which == runtime::Logits::last) logits.erase(logits.begin(), logits.end() - std::ptrdiff_t(V));
  else if (which == runtime::Logits::none) logits.clear();
  return {};
}

}  // namespace strata::session
