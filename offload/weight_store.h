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
// Disk tier: a block marked on_disk has no pinned copy. Its tensors are read from the model file
// (io/block_reader.h: io_uring, O_DIRECT, several reads in flight) into one of two pinned bounce
// buffers when its copy is issued, then copied on like a pinned block. The read runs on the host
// while the GPU works on the blocks already enqueued (up to ring_slots - 1 ahead), so a disk-bound
// schedule keeps the disk busy back to back; a bounce buffer is reused only after the event that
// ends its copies (a host wait on the copy stream, never on compute).
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
#include "io/block_reader.h"
#include "kernels/cuda/cuda_api.h"
#include "offload/gpu_timeline.h"
#include "offload/vram_arena.h"

namespace strata::offload {

struct StreamedTensor {
  const void* host_src = nullptr;  // where the bytes are now (e.g. the model file mapping)
  uint64_t bytes = 0;
  uint64_t offset = 0;             // in the packed block (set by pack_block)
  uint64_t file_offset = 0;        // on_disk blocks: where the bytes are in the model file
};
struct StreamedBlockSpec {
  std::string label;               // "attn 12", "ffn 3", "head": for errors and traces
  std::vector<StreamedTensor> tensors;
  uint64_t bytes = 0;              // packed size (set by pack_block)
  bool on_disk = false;            // read from the file at each use instead of kept pinned
  // Copied from host_src at each use through a pinned bounce buffer (no pinned copy of its own):
  // cpu-tier blocks, which the CPU computes for decode but a prefill chunk runs on the GPU.
  bool from_host = false;
};
// Where on_disk blocks are read from.
struct DiskSource {
  std::string path;                // the model file
  io::ReaderOptions reader;        // backend, queue depth, faults (tests)
};
// Host-sourced blocks (from_host): like disk blocks without the read; when the copy is issued the
// tensors are memcpy'd from host_src (pageable, e.g. the model mapping) into one of two pinned
// bounce buffers and copied on. Such blocks need not be in every schedule: the CUDA engine
// schedules them only for prefill chunks.
//
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
    uint64_t disk_reads = 0, disk_bytes = 0;  // on_disk blocks read, and their bytes
    double disk_seconds = 0;                  // host time spent in those reads
  };

  // Pins and packs every block (errors: pinned budget or allocation refused, naming the block),
  // allocates ring_slots slots of the largest block's size from the arena. ring_slots >= 2.
  // fill = false: the pinned buffers are left for the caller to fill (pinned(), e.g. by the
  // weight loader reading the file directly) before the first acquire.
  static Result<std::unique_ptr<WeightStore>> create(VramArena& arena, std::vector<StreamedBlockSpec> blocks,
                                                     uint32_t ring_slots, uint64_t pinned_budget,
                                                     kernels::cuda::Stream compute, bool fill = true,
                                                     const DiskSource* disk = nullptr);
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  size_t n_blocks() const { return blocks_.size(); }
  const StreamedBlockSpec& block(size_t i) const { return blocks_[i]; }
  // Block i's packed bytes in pinned memory (null for on_disk blocks).
  uint8_t* pinned(size_t i) const { return static_cast<uint8_t*>(pinned_[i]); }
  // The disk reader's one-line fallback notice (empty when none, or no disk blocks).
  std::string disk_notice() const { return reader_ ? reader_->notice() : std::string(); }

  // The blocks the next chunk will acquire, in order (ids < n_blocks()).
  Status set_schedule(std::vector<uint32_t> order);
  // Device address of the block's packed bytes, valid for kernels enqueued on the compute stream
  // until release(). Must follow the schedule.
  Result<const uint8_t*> acquire(uint32_t block);
  Status release(uint32_t block);
  const Stats& stats() const { return stats_; }
  // Copies appear as spans on the timeline's "h2d copy" track (null: no tracing).
  void set_timeline(GpuTimeline* t) { timeline_ = t; }

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
  GpuTimeline* timeline_ = nullptr;

  // Disk tier (empty without on_disk blocks).
  Status open_disk(const DiskSource& disk);
  Status read_and_copy(uint32_t block, uint8_t* slot);
  struct Bounce {
    void* raw = nullptr;
    uint8_t* base = nullptr;    // page-aligned
    kernels::cuda::Event copied = nullptr;
    bool busy = false;          // `copied` recorded and maybe not complete
  };
  std::unique_ptr<io::BlockReader> reader_;
  std::vector<Bounce> bounce_;
  uint64_t bounce_uses_ = 0;
  std::vector<std::vector<uint64_t>> bounce_offset_;  // per block, per tensor: where its span lands

  // Host-sourced blocks (empty without from_host blocks).
  Status open_host_bounce(uint64_t bytes);
  Status host_copy(uint32_t block, uint8_t* slot);
  std::vector<Bounce> host_bounce_;
  uint64_t host_bounce_uses_ = 0;
};

}  // namespace strata::offload
