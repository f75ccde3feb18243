#include "kv/sequence_table.h"

#include <algorithm>

#include "core/kv_ring.h"

namespace strata::kv {

SequenceTable::SequenceTable(std::vector<uint32_t> windows, uint32_t n_ctx, uint32_t margin, uint32_t n_seq)
    : seqs_(n_seq), n_ctx_(n_ctx), margin_(margin) {
  slots_.reserve(windows.size());
  for (uint32_t w : windows) {
    slots_.push_back(uint32_t(kv_ring_slots(w, n_ctx, margin)));
    if (slots_.back() < n_ctx) ring_slots_ = ring_slots_ ? std::min(ring_slots_, slots_.back()) : slots_.back();
  }
}

uint32_t SequenceTable::slot(uint32_t il, uint32_t pos) const { return kv_ring_slot(pos, slots_.at(il)); }

uint32_t SequenceTable::length(uint32_t seq) const {
  STRATA_CHECK(seq < seqs_.size(), "sequence {} of {}", seq, seqs_.size());
  return seqs_[seq].length;
}

uint32_t SequenceTable::written_end(uint32_t seq) const {
  STRATA_CHECK(seq < seqs_.size(), "sequence {} of {}", seq, seqs_.size());
  return seqs_[seq].written_end;
}

Status SequenceTable::check_seq(uint32_t seq) const {
  if (seq >= seqs_.size()) return Status::error("sequence {} is out of range (the engine holds {})", seq, seqs_.size());
  return {};
}

Status SequenceTable::check_append(uint32_t seq, uint64_t n) const {
  STRATA_TRY(check_seq(seq));
  const uint32_t len = seqs_[seq].length;
  if (uint64_t(len) + n > n_ctx_)
    return Status::error("context full: {} tokens already, {} more would exceed the context of {}", len, n, n_ctx_);
  return {};
}

Status SequenceTable::check_write(uint32_t seq, uint32_t pos0, uint64_t n) const {
  STRATA_TRY(check_seq(seq));
  const uint64_t end_pos = uint64_t(pos0) + n;
  if (end_pos > n_ctx_)
    return Status::error("context full: positions up to {} would exceed the context of {}", end_pos, n_ctx_);
  // A sliding layer's ring holds window + margin slots: writing further ahead of the length would
  // overwrite keys that queries at the length still read.
  const uint32_t len = seqs_[seq].length;
  if (end_pos > uint64_t(len) + margin_)
    return Status::error("positions up to {} are more than ubatch ({}) past the {} evaluated", end_pos, margin_, len);
  return {};
}

Result<std::vector<int32_t>> SequenceTable::place_rows(std::span<const uint32_t> seqs) const {
  std::vector<uint32_t> count(seqs_.size(), 0);
  std::vector<int32_t> pos(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    const uint32_t s = seqs[i];
    if (s >= seqs_.size())
      return Status::error("row {}: sequence {} is out of range (the engine holds {})", i, s, seqs_.size());
    const uint64_t p = uint64_t(seqs_[s].length) + count[s];
    if (p >= n_ctx_) return Status::error("row {}: context of sequence {} full ({} tokens, context {})", i, s, p, n_ctx_);
    // Like check_write: a sliding layer's ring holds window + margin slots.
    if (++count[s] > margin_)
      return Status::error("row {}: more than ubatch ({}) rows of sequence {} in one step", i, margin_, s);
    pos[i] = int32_t(p);
  }
  return pos;
}

void SequenceTable::append(uint32_t seq, uint32_t n) {
  const uint32_t len = length(seq);
  wrote(seq, len, n, true);
}

void SequenceTable::wrote(uint32_t seq, uint32_t pos0, uint32_t n, bool complete) {
  STRATA_CHECK(seq < seqs_.size() && uint64_t(pos0) + n <= n_ctx_, "KV write of sequence {} at [{}, {}) (n_ctx {})",
               seq, pos0, uint64_t(pos0) + n, n_ctx_);
  Seq& s = seqs_[seq];
  s.written_end = std::max(s.written_end, pos0 + n);
  if (complete) set_length(seq, pos0 + n);
}

void SequenceTable::placed(std::span<const uint32_t> seqs, std::span<const int32_t> pos) {
  STRATA_CHECK(seqs.size() == pos.size(), "{} rows, {} positions", seqs.size(), pos.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = seqs_.at(seqs[i]);
    const uint32_t end = uint32_t(pos[i]) + 1;
    s.written_end = std::max(s.written_end, end);
    s.length = std::max(s.length, end);
  }
}

bool SequenceTable::can_truncate(uint32_t seq, uint32_t n) const {
  const Seq& s = seqs_.at(seq);
  if (n == 0 || n >= s.length || ring_slots_ == 0) return true;
  // In a ring of C = window + margin slots, the oldest key a query at n (or later) still reads is
  // max(0, n - window + 1); a write at that position + C overwrote it. So no write may have
  // reached max(C, n + margin + 1). Exact for writes without gaps (the engines' way), sufficient
  // for any. The smallest ring decides.
  return uint64_t(s.written_end) <= std::max<uint64_t>(ring_slots_, uint64_t(n) + margin_ + 1);
}

void SequenceTable::truncate(uint32_t seq, uint32_t n) {
  STRATA_CHECK(seq < seqs_.size(), "truncate: sequence {} of {}", seq, seqs_.size());
  set_length(seq, std::min(n, seqs_[seq].length));
}

void SequenceTable::set_length(uint32_t seq, uint32_t n) {
  Seq& s = seqs_[seq];
  if (n == 0) {
    s = {};  // a restart: nothing written is visible any more
    return;
  }
  // Not asserted (can_truncate): Engine::truncate has always accepted any n, and a caller may roll
  // back past the rule to look at lengths only; decoding on from there would read lost keys.
  s.length = n;
}

}  // namespace strata::kv
