// WeightStore: run-time residency of the weight blocks that the plan does not keep in VRAM
// (tier `stream`). At load, each such block's tensors are packed back to back into one pinned host
// buffer; at run time the block is copied into a slot of a VRAM staging ring just ahead of use.
//
// Pipeline (DESIGN.md, "data flow of one decode step"): a dedicated copy stream runs up to
// `ring_slots - 1` blocks ahead of the compute stream.
//   copy of use #u:   copy stream waits slot_free[u % N] (recorded when use #u - N was released),
//                     copies pinned -> slot u % N, records ready[u % N];
//   acquire (use #u): compute stream waits ready[u % N]; the host never blocks;
//   release (use #u): compute stream records slot_free[u % N].
// The copies for use #u are issued at acquire(#u - N + 1), after release(#u - N) was enqueued, so
// every wait refers to an event that has already been recorded: slot reuse is ordered by events,
// never by device-wide syncs.
//
// The order of uses is a schedule (the streamed blocks of one forward chunk, in order) repeated:
// decode steps all have the same schedule, so the next step's first blocks are prefetched while
// the current step finishes. A new schedule (e.g. prefill -> decode) drops the predictions: copies
// already issued complete into their slots unused, and later copies queue behind them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/cuda_api.h"
#include "offload/vram_arena.h"

namespace strata::offload {

struct StreamedTensor {
  const void* host_src = nullptr;  // where the bytes are now (e.g. the model file mapping)
  uint64_t bytes = 0;
  uint64_t offset = 0;             // in the packed block (set by pack_block)
};
struct StreamedBlockSpec {
  std::string label;               // "attn 12", "ffn 3", "head": for errors and traces
  std::vector<StreamedTensor> tensors;
  uint64_t bytes = 0;              // packed size (set by pack_block)
};
// Assigns offsets (256-byte aligned: every kernel's alignment contract holds in the slot).
void pack_block(StreamedBlockSpec& b);

// Test hook for the pinned-allocation failure path (a real refusal needs a host out of lockable
// memory): the nth pinned allocation WeightStore::create makes from now on (1 = the next) fails as
// if the driver refused it, once; 0 disarms. Not for concurrent use with create().
void inject_pinned_alloc_failure(uint32_t nth);

class WeightStore {
 public:
  struct Stats {
    uint64_t copies = 0, bytes_copied = 0, schedule_resets = 0;
    uint64_t pinned_bytes = 0, ring_bytes = 0;
  };

  // Pins and packs every block (errors: pinned budget or allocation refused, naming the block),
  // allocates ring_slots slots of the largest block's size from the arena. ring_slots >= 2.
  static Result<std::unique_ptr<WeightStore>> create(VramArena& arena, std::vector<StreamedBlockSpec> blocks,
                                                     uint32_t ring_slots, uint64_t pinned_budget,
                                                     kernels::cuda::Stream compute);
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  size_t n_blocks() const { return blocks_.size(); }
  const StreamedBlockSpec& block(size_t i) const { return blocks_[i]; }

  // The blocks the next chunk will acquire, in order (ids < n_blocks()).
  Status set_schedule(std::vector<uint32_t> order);
  // Device address of the block's packed bytes, valid for kernels enqueued on the compute stream
  // until release(). Must follow the schedule.
  Result<const uint8_t*> acquire(uint32_t block);
  Status release(uint32_t block);
  const Stats& stats() const { return stats_; }

 private:
  WeightStore() = default;
  Status issue_copies_through(uint64_t use);

  std::vector<StreamedBlockSpec> blocks_;
  std::vector<void*> pinned_;          // per block
  std::vector<uint8_t*> slots_;        // ring
  std::vector<kernels::cuda::Event> ready_, slot_free_;
  std::vector<bool> slot_used_;        // slot_free_ has been recorded at least once
  kernels::cuda::Stream compute_ = nullptr, copy_ = nullptr;
  std::vector<uint32_t> schedule_;
  uint64_t uses_ = 0;                  // acquires so far
  uint64_t schedule_base_ = 0;         // use number of schedule_[0] in the current repetition
  uint64_t issued_ = 0;                // copies issued for uses [0, issued_)
  bool acquired_ = false;
  Stats stats_;
};

}  // namespace strata::offload
