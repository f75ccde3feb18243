// KV metadata, apart from KV storage (vLLM's block table, llama.cpp's KV cells): for each
// sequence an engine holds, how many positions are valid and how far writes have gone; for each
// layer, how many slots it keeps and which slot holds a position. Every rule about those numbers
// lives here, once, for every engine (CPU: kv::KvCache storage per sequence; CUDA: device stores
// allocated in runtime/cuda_allocate.cpp); storage only stores rows where the table says.
//
// The rules:
//   - Slots: a full-attention layer keeps n_ctx slots, a sliding layer a ring of
//     window + margin (core/kv_ring.h); position p lives in slot p % slots(il).
//   - Write-ahead margin: a call may write positions up to `margin` (the engine's ubatch) past a
//     sequence's length (a prefill chunk, a draft, a verify batch), never past n_ctx. That is what
//     the ring's extra `margin` slots absorb: no write overwrites a key a query at the length
//     still reads.
//   - Rollback: truncate(n) forgets positions >= n. Every key a later query can see is still in
//     its slot as long as no write reached more than `margin` positions past n (or, early in a
//     sequence, went past the ring's first lap): can_truncate(n). Where a ring is shorter than the
//     context, a deeper rollback loses keys that decoding on from n would read (they were
//     overwritten); truncate() still accepts it (the engines always have), so callers that decode
//     on (the speculative decoder: at most ubatch - 1 drafts) stay within the rule.
//     truncate(0) is always safe (a restart).
//
// Checks return errors with the engine's messages and change nothing; updates assume a check
// passed. Pure data (no device, no storage): tests/kv/test_sequence_table.cpp. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace strata::kv {

class SequenceTable {
 public:
  // windows: per layer, the sliding window (0: full attention). margin: the engine's ubatch.
  SequenceTable(std::vector<uint32_t> windows, uint32_t n_ctx, uint32_t margin, uint32_t n_seq);

  uint32_t n_seq() const { return uint32_t(seqs_.size()); }
  uint32_t n_ctx() const { return n_ctx_; }
  uint32_t margin() const { return margin_; }
  uint32_t n_layer() const { return uint32_t(slots_.size()); }
  // KV slots layer il keeps, and the slot of position pos in it.
  uint32_t slots(uint32_t il) const { return slots_.at(il); }
  uint32_t slot(uint32_t il, uint32_t pos) const;

  // Positions [0, length) of sequence seq are valid (the engine's n_past). seq < n_seq (asserted).
  uint32_t length(uint32_t seq) const;
  // One past the highest position written since the last restart (truncate(seq, 0)).
  uint32_t written_end(uint32_t seq) const;

  // ---- checks (errors change nothing) ----
  // A sequence in range (the message names how many the engine holds).
  Status check_seq(uint32_t seq) const;
  // Appending n positions at the length (eval): "context full" when they do not fit.
  Status check_append(uint32_t seq, uint64_t n) const;
  // Writing positions [pos0, pos0 + n) of seq (eval_layers): within n_ctx and at most `margin`
  // past the length.
  Status check_write(uint32_t seq, uint32_t pos0, uint64_t n) const;
  // One batched step (eval_batch): row i appends to seqs[i] after the earlier rows of the same
  // sequence. Returns each row's position; errors name the row (a sequence out of range, a
  // context full, more than `margin` rows of one sequence).
  Result<std::vector<int32_t>> place_rows(std::span<const uint32_t> seqs) const;

  // ---- updates ----
  // Positions [length, length + n) were written and are now valid (an eval chunk, after its check).
  void append(uint32_t seq, uint32_t n);
  // Positions [pos0, pos0 + n) were written in some layers; `complete` (every layer written):
  // the length becomes pos0 + n (which may roll it back, as truncate does).
  void wrote(uint32_t seq, uint32_t pos0, uint32_t n, bool complete);
  // The rows of a place_rows() result were written: each sequence's length covers its rows.
  void placed(std::span<const uint32_t> seqs, std::span<const int32_t> pos);
  // Forgets positions >= n (min with the length; never grows it). n = 0 restarts the sequence.
  void truncate(uint32_t seq, uint32_t n);
  // Whether truncate(seq, n) keeps every key later queries read (the rollback rule).
  bool can_truncate(uint32_t seq, uint32_t n) const;

 private:
  struct Seq {
    uint32_t length = 0;
    uint32_t written_end = 0;
  };
  void set_length(uint32_t seq, uint32_t n);

  std::vector<uint32_t> slots_;  // per layer
  std::vector<Seq> seqs_;
  uint32_t n_ctx_ = 0, margin_ = 0;
  uint32_t ring_slots_ = 0;  // the smallest ring shorter than the context (0: none): bounds rollback
};

}  // namespace strata::kv
