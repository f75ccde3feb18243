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
// buffers, then copied on like a pinned block. The reads run on an io thread (offload/io_thread.h)
// and hand back a future: a read is posted as soon as its use is within the copy window (up to
// ring_slots - 1 uses ahead) and a bounce buffer is free (the copies from its previous read are
// done: a host check of that buffer's event, never a wait on a stream), so a disk-bound schedule
// keeps the disk busy back to back while the enqueuing thread runs on. Its copy is enqueued once
// the read is done; until then later copies queue behind it (the copy stream stays in use order).
// The enqueuing thread blocks on a read only in acquire() of the very block, when the read is late
// (Stats::disk_wait_seconds). Reads posted for a prediction that a new schedule drops finish on
// the io thread unused (reads run in posting order, so a later read into the same buffer waits).
//
// The order of uses is a schedule (the streamed blocks of one forward chunk, in order) repeated:
// decode steps all have the same schedule, so the next step's first blocks are prefetched while
// the current step finishes. A new schedule (e.g. prefill -> decode) drops the predictions: copies
// already issued complete into their slots unused, and later copies queue behind them.
//
// Graph steps (CUDA graphs while blocks stream): a step captured as a graph must find each block at
// the same device address at every replay, and must carry its own copies. So a graph step's
// schedule is step-local: use j of the step goes to slot j % N (N = ring_slots), whatever ran
// before, and its copies are captured into the graph on the copy stream (forked from the compute
// stream at begin_graph_schedule, joined back at end_graph_schedule), ordered by the same
// ready / slot_free events, which inside a capture become graph edges. A block's views can then be
// written once at capture time: they stay valid for every replay. To keep the copy engine busy
// across steps as the eager path does, a graph step is followed by a tail: the copies of its
// schedule's first P = min(N - 1, S) uses into slots 0..P-1 for the next step. The tail is issued
// outside the graph, on the copy stream right after the launch (graph_launched), each copy waiting
// for the graph's last use of its slot through an external event node (tail_free_): so the graph
// completes with its compute, and the tail's copies keep PCIe busy while the host syncs, samples
// and launches the next step (inside the graph, the tail made every step wait for it, and the copy
// engine sat idle through that host turnaround: 91% of the PCIe roofline against 99% eager, 27B at
// --vram 12GiB on the H200). The next graph step of the same schedule is captured "warm" (those P
// copies skipped: the compute stream waits for the tail before the launch); any other schedule is
// "cold" (copies everything). Only pinned blocks can be in a graph step (a disk read or a host copy
// is host work); graphable() says.
// The eager and graph modes share the ring: before a graph launch the compute stream waits for the
// copy stream's work (eager copies, a tail: before_graph_launch), and the first eager schedule after
// graphs makes the copy stream wait for the compute stream (every graph launched so far) before it
// reuses a slot.
//
// Two-ended ring (shared_ring.h, create's shared_ring): the two slots of a depth-1 ring share one
// buffer sized for the largest pair of neighbours in the decode order, slot 0 bottom-aligned and
// slot 1 top-aligned under each block's size. All the above holds as it is (uses alternate slots,
// events per slot); in addition a use whose size and its predecessor's exceed the buffer is copied
// only after that predecessor's release: its copy is issued at its own acquire (eager) or in the
// graph at that point, and a graph's tail copy into slot 0 waits for the step's last use where that
// one and the next step's first do not fit together (g_tail_use_).
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/block_reader.h"
#include "kernels/cuda/cuda_api.h"
#include "offload/gpu_timeline.h"
#include "offload/io_thread.h"
#include "offload/pinned_pool.h"
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

class WeightStore {
 public:
  struct Stats {
    uint64_t copies = 0, bytes_copied = 0, schedule_resets = 0;
    uint64_t pinned_bytes = 0, ring_bytes = 0;
    bool shared_ring = false;                 // the two slots share one two-ended buffer
    uint64_t disk_reads = 0, disk_bytes = 0;  // on_disk blocks read, and their bytes
    double disk_seconds = 0;                  // host time spent in those reads (on the io thread)
    double disk_wait_seconds = 0;             // time the enqueuing thread waited for late reads
  };

  // Pins (from `pinned`, which outlives the store) and packs every block, and the bounce buffers
  // of the disk tier and host-sourced blocks (errors: the pool's budget or a refused allocation,
  // naming the block), allocates ring_slots slots of the largest block's size from the arena, or,
  // with shared_ring, two slots and no disk blocks, one two-ended buffer (offload/shared_ring.h: the
  // largest pair of neighbours among the pinned blocks in store order, which must be streaming
  // order) where that is smaller.
  // ring_slots >= 2. fill = false: the pinned buffers are left for the caller to fill (pinned(),
  // e.g. by the weight loader reading the file directly) before the first acquire.
  static Result<std::unique_ptr<WeightStore>> create(VramArena& arena, PinnedPool& pinned,
                                                     std::vector<StreamedBlockSpec> blocks, uint32_t ring_slots,
                                                     kernels::cuda::Stream compute, bool fill = true,
                                                     const DiskSource* disk = nullptr, bool shared_ring = false);
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  size_t n_blocks() const { return blocks_.size(); }
  const StreamedBlockSpec& block(size_t i) const { return blocks_[i]; }
  // Block i's packed bytes in pinned memory (null for on_disk blocks).
  uint8_t* pinned(size_t i) const { return pinned_[i]; }
  // The disk reader's one-line fallback notice (empty when none, or no disk blocks).
  std::string disk_notice() const;

  // The blocks the next chunk will acquire, in order (ids < n_blocks()).
  Status set_schedule(std::vector<uint32_t> order);
  // Device address of the block's packed bytes, valid for kernels enqueued on the compute stream
  // until release(). Must follow the schedule.
  Result<const uint8_t*> acquire(uint32_t block);
  Status release(uint32_t block);
  Stats stats() const;  // a snapshot (the disk figures are written by the io thread)

  // ---- graph steps (see the header comment) ----
  // Every block of `order` is pinned (no disk read, no host copy): the schedule can be captured.
  bool graphable(const std::vector<uint32_t>& order) const;
  // The slots hold the first uses of `order`, left there by the last graph step's tail.
  bool prefilled(const std::vector<uint32_t>& order) const {
    return !order.empty() && prefilled_ && order == prefilled_order_;
  }
  // While the compute stream is capturing: forks the copy stream into the capture and makes
  // `order` the step-local schedule of the captured step (warm: the tail of the previous graph step
  // filled the first uses). acquire/release then follow it until end_graph_schedule, which joins
  // the copy stream back into the compute stream.
  Status begin_graph_schedule(std::vector<uint32_t> order, bool warm);
  Status end_graph_schedule();
  // After a failed capture: leaves graph mode (nothing of the capture ran).
  void abort_graph_schedule() { graph_mode_ = false; acquired_ = false; }
  // Before launching a graph step: the compute stream waits for every copy issued outside a graph
  // so far (eager copies, the last graph's tail).
  Status before_graph_launch();
  // After launching a graph step (of schedule `order`, warm or cold): issues its tail (the next
  // step's first uses, see above), counts its copies and notes which uses the tail prefilled.
  Status graph_launched(const std::vector<uint32_t>& order, bool warm);
  // Copies appear as spans on the timeline's "h2d copy" track (null: no tracing).
  void set_timeline(GpuTimeline* t) { timeline_ = t; }

 private:
  WeightStore() = default;
  // Issues the copies of uses up to last_use, in order; a disk use whose read is not done yet
  // stops the issuing there, unless it is the use being acquired now (needed_now: then wait).
  Status issue_copies_through(uint64_t last_use, bool needed_now);
  struct TakenRead;
  // One use's copy into its slot (after the slot's last use), its ready event and its figures.
  Status issue_copy(uint32_t block, size_t slot, const std::optional<TakenRead>& read);
  Status copy_pinned(uint32_t block, size_t slot);  // one pinned block into a slot, on the copy stream
  Status issue_graph_copies_through(uint64_t use);
  // Where a use of `block` in `slot` lands: the slot, or in a two-ended ring slot 1 top-aligned.
  uint8_t* slot_addr(size_t slot, uint32_t block) const {
    return shared_bytes_ && slot == 1 ? slots_[1] + (shared_bytes_ - blocks_[block].bytes) : slots_[slot];
  }
  // Two consecutive uses can be in VRAM together (always with slots of the largest block's size).
  bool fits_beside(uint32_t a, uint32_t b) const {
    return !shared_bytes_ || blocks_[a].bytes + blocks_[b].bytes <= shared_bytes_;
  }
  uint64_t shared_bytes_ = 0;   // a two-ended ring's buffer (0: fixed slots)
  int64_t last_acquired_ = -1;  // eager: the block of use uses_ - 1 (-1: none, or complete)

  // Graph-step state (begin_graph_schedule .. end_graph_schedule), and what the tails left behind.
  bool graph_mode_ = false;
  std::vector<uint32_t> g_order_;
  uint64_t g_use_ = 0, g_issued_ = 0, g_prefetch_ = 0;
  bool g_warm_ = false;
  std::vector<bool> g_slot_used_;
  std::vector<uint64_t> g_tail_use_;  // per tail slot i < g_prefetch_: the use whose release frees it
  kernels::cuda::Event fork_ = nullptr, join_ = nullptr, fence_ = nullptr;
  // Per slot < P: recorded (an external node of the graph) at a graph step's last use of the slot;
  // the tail's copy into the slot waits for it.
  std::vector<kernels::cuda::Event> tail_free_;
  bool prefilled_ = false;               // the slots hold prefilled_order_'s first uses
  std::vector<uint32_t> prefilled_order_;
  bool graphs_since_eager_ = false;      // a graph step was launched after the last eager schedule
  bool eager_since_graph_ = false;       // eager copies were issued after the last graph launch
  bool tail_pending_ = false;            // a graph's tail was issued after the last graph launch

  std::vector<StreamedBlockSpec> blocks_;
  PinnedPool* pool_ = nullptr;
  std::vector<uint8_t*> pinned_;       // per block (null: on disk or host-sourced)
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

  // Disk tier (empty without on_disk blocks): weight_store_disk.cpp.
  struct DiskRead {  // what a read job hands back
    Status status;
    std::vector<std::span<const uint8_t>> data;  // per tensor: its bytes in the bounce buffer
  };
  struct PendingRead {
    uint64_t use = 0;  // the use it was posted for
    uint64_t seq = 0;  // the read's number: bounce buffer seq % 2
    std::future<DiskRead> done;
  };
  Status open_disk(const DiskSource& disk);
  // Posts the reads of the disk uses in [max(read_scan_, issued_), last_use] while a bounce
  // buffer is free; wait_first: the first of them is needed now (wait for its buffer).
  Status post_reads(uint64_t last_use, bool wait_first);
  struct TakenRead {
    uint64_t seq = 0;
    std::vector<std::span<const uint8_t>> data;
  };
  // The finished read for disk use `use` (the next to issue), or nullopt when it is not done (or
  // not posted) yet; needed: wait for it. A failed read is its error (and the posted reads go).
  Result<std::optional<TakenRead>> take_read(uint64_t use, bool needed);
  Status copy_disk(uint32_t block, uint8_t* slot, const TakenRead& read);
  void drop_reads();  // forgets the posted reads (a new schedule, or a failed read)
  std::unique_ptr<io::BlockReader> reader_;  // used by the io thread only, after open_disk
  std::unique_ptr<BounceRing> bounce_;  // two: one is read while the other's copies run
  std::vector<std::vector<uint64_t>> bounce_offset_;  // per block, per tensor: where its span lands
  std::unique_ptr<IoThread> io_;
  std::deque<PendingRead> reads_;  // posted and not yet copied, in use order (at most one per buffer)
  uint64_t reads_posted_ = 0;
  uint64_t read_scan_ = 0;  // uses below it have their read posted, or need none
  mutable std::mutex disk_mu_;  // the read jobs' figures and the reader's notice
  Stats disk_stats_;            // disk_reads, disk_bytes, disk_seconds (under disk_mu_)
  std::string disk_notice_;     // under disk_mu_

  // Host-sourced blocks (empty without from_host blocks).
  Status open_host_bounce(uint64_t bytes);
  Status host_copy(uint32_t block, uint8_t* slot);
  std::unique_ptr<BounceRing> host_bounce_;  // two: one is filled while the other's copy runs
};

}  // namespace strata::offload
