#include "offload/weight_store.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/log.h"
#include "core/units.h"
#include "offload/shared_ring.h"
#include "io/aligned_buffer.h"

namespace strata::offload {

namespace cuda = kernels::cuda;

void pack_block(StreamedBlockSpec& b) {
  uint64_t off = 0;
  for (auto& t : b.tensors) {
    t.offset = off;
    off = (off + t.bytes + 255) / 256 * 256;
  }
  b.bytes = off;
}

Result<std::unique_ptr<WeightStore>> WeightStore::create(VramArena& arena, PinnedPool& pool,
                                                         std::vector<StreamedBlockSpec> blocks, uint32_t ring_slots,
                                                         cuda::Stream compute, bool fill, const DiskSource* disk,
                                                         bool shared_ring) {
  if (blocks.empty()) return Status::error("weight store: no streamed blocks");
  if (ring_slots < 2) return Status::error("weight store: the staging ring needs at least 2 slots (got {})", ring_slots);
  std::unique_ptr<WeightStore> ws(new WeightStore());
  ws->compute_ = compute;
  ws->pool_ = &pool;
  const uint64_t pinned_before = pool.used_bytes();
  uint64_t slot_bytes = 0, pinned = 0, host_bounce = 0;
  bool any_disk = false;
  for (auto& b : blocks) {
    if (b.on_disk && b.from_host) return Status::error("weight store: block {} is both on disk and host-sourced", b.label);
    pack_block(b);
    slot_bytes = std::max(slot_bytes, b.bytes);
    if (!b.on_disk && !b.from_host) pinned += b.bytes;
    if (b.from_host) host_bounce = std::max(host_bounce, b.bytes);
    any_disk |= b.on_disk;
  }
  if (any_disk && !disk) return Status::error("weight store: blocks on the disk tier but no file to read them from");
  const uint64_t budget = pool.budget_bytes();
  if (budget && pool.used_bytes() + pinned > budget)
    return Status::error("pinned-RAM budget {} exceeded: the streamed blocks need {}", format_bytes(budget),
                         format_bytes(pinned));
  ws->blocks_ = std::move(blocks);
  for (const auto& b : ws->blocks_) {
    if (b.on_disk || b.from_host) {
      ws->pinned_.push_back(nullptr);
      continue;
    }
    auto p = pool.alloc(b.bytes, "block " + b.label, false);
    if (!p) return p.status();
    ws->pinned_.push_back(*p);
    if (fill)
      for (const auto& t : b.tensors) std::memcpy(*p + t.offset, t.host_src, t.bytes);
  }
  // Two-ended (shared_ring.h): the largest pair of neighbours among the blocks a decode step streams
  // (the pinned ones, in store order = streaming order), at least the largest block of all.
  uint64_t shared_bytes = 0;
  if (shared_ring && ring_slots == 2 && !any_disk) {
    std::vector<uint64_t> order;
    for (const auto& b : ws->blocks_)
      if (!b.from_host) order.push_back(b.bytes);
    shared_bytes = std::max(slot_bytes, shared_ring_bytes(order));
    if (shared_bytes >= 2 * slot_bytes) shared_bytes = 0;  // no gain: two slots
  }
  if (shared_bytes) {
    auto p = arena.alloc(shared_bytes, "staging ring (two-ended)");
    if (!p) return p.status();
    ws->shared_bytes_ = shared_bytes;
    ws->slots_.assign(2, static_cast<uint8_t*>(*p));  // slot 1 is top-aligned: slot_addr
  }
  for (uint32_t i = 0; i < ring_slots; ++i) {
    if (!shared_bytes) {
      auto p = arena.alloc(slot_bytes, "staging ring slot " + std::to_string(i));
      if (!p) return p.status();
      ws->slots_.push_back(static_cast<uint8_t*>(*p));
    }
    auto r = cuda::event_create(), f = cuda::event_create(), t = cuda::event_create();
    if (!r) return r.status();
    if (!f) return f.status();
    if (!t) return t.status();
    ws->ready_.push_back(*r);
    ws->slot_free_.push_back(*f);
    ws->tail_free_.push_back(*t);
  }
  ws->slot_used_.assign(ring_slots, false);
  ws->g_slot_used_.assign(ring_slots, false);
  for (auto* e : {&ws->fork_, &ws->join_, &ws->fence_}) {
    auto ev = cuda::event_create();
    if (!ev) return ev.status();
    *e = *ev;
  }
  if (any_disk) STRATA_TRY(ws->open_disk(*disk));
  if (host_bounce) STRATA_TRY(ws->open_host_bounce(host_bounce));
  ws->stats_.ring_bytes = shared_bytes ? shared_bytes : slot_bytes * ring_slots;
  ws->stats_.shared_ring = shared_bytes > 0;
  ws->stats_.pinned_bytes = pool.used_bytes() - pinned_before;  // blocks and bounce buffers
  auto copy = cuda::stream_create();
  if (!copy) return copy.status();
  ws->copy_ = *copy;
  return ws;
}

WeightStore::~WeightStore() {
  io_.reset();  // runs the reads still queued (they write the bounce buffers), then joins
  if (copy_) (void)cuda::synchronize(copy_);
  if (compute_) (void)cuda::synchronize(compute_);  // kernels may still read a slot
  for (auto e : ready_) cuda::event_destroy(e);
  for (auto e : slot_free_) cuda::event_destroy(e);
  for (auto e : tail_free_) cuda::event_destroy(e);
  for (auto e : {fork_, join_, fence_})
    if (e) cuda::event_destroy(e);
  for (uint8_t* p : pinned_) pool_->release(p);
  bounce_.reset();
  host_bounce_.reset();
  if (copy_) cuda::stream_destroy(copy_);
}

Status WeightStore::set_schedule(std::vector<uint32_t> order) {
  if (acquired_) return Status::error("weight store: schedule changed while block is acquired");
  for (uint32_t b : order)
    if (b >= blocks_.size()) return Status::error("weight store: block {} in schedule, only {} blocks", b, blocks_.size());
  if (graphs_since_eager_) {
    // Graph steps used the slots without recording slot_free_ outside their graphs: the copy
    // stream waits for everything enqueued on the compute stream so far, then every slot is free.
    STRATA_TRY(cuda::event_record(fence_, compute_));
    STRATA_TRY(cuda::stream_wait(copy_, fence_));
    slot_used_.assign(slots_.size(), false);
    last_acquired_ = -1;  // every use so far is complete before the next copy
    graphs_since_eager_ = false;
    schedule_.clear();
  }
  if (!order.empty()) {
    prefilled_ = false;  // eager copies will overwrite what a graph tail left
    eager_since_graph_ = true;
  }
  // The schedule restarts at the next use; when it differs, copies issued ahead for the old one
  // are dropped (their slots are overwritten in order on the copy stream).
  if (!schedule_.empty() && (uses_ - schedule_base_) % schedule_.size() == 0 && order == schedule_) {
    schedule_base_ = uses_;
    return Status::ok();
  }
  if (issued_ > uses_) ++stats_.schedule_resets;
  schedule_ = std::move(order);
  schedule_base_ = uses_;
  issued_ = uses_;
  drop_reads();
  return Status::ok();
}

Status WeightStore::open_host_bounce(uint64_t bytes) {
  auto ring = BounceRing::create(*pool_, 2, bytes, "cpu-tier blocks");
  if (!ring) return ring.status();
  host_bounce_ = std::move(ring.value());
  return Status::ok();
}

Status WeightStore::host_copy(uint32_t b, uint8_t* slot) {
  const auto& blk = blocks_[b];
  auto base = host_bounce_->acquire();
  if (!base) return base.status();
  for (const auto& t : blk.tensors) std::memcpy(*base + t.offset, t.host_src, t.bytes);
  STRATA_TRY(cuda::copy_to_device(slot, *base, blk.bytes, copy_).with_context(fmt::format("block {}", blk.label)));
  return host_bounce_->copies_enqueued(copy_);
}

Status WeightStore::issue_copies_through(uint64_t last_use, bool needed_now) {
  for (; issued_ <= last_use; ++issued_) {
    const uint32_t b = schedule_[(issued_ - schedule_base_) % schedule_.size()];
    // The use before this one (acquired already, or the schedule's): in a two-ended ring a
    // neighbour that does not fit beside it must be released first, so the copy waits for a
    // later call (the acquire of this very use, after that release).
    const int64_t prev =
        issued_ == uses_ ? last_acquired_ : int64_t(schedule_[(issued_ - 1 - schedule_base_) % schedule_.size()]);
    const bool after_prev = prev >= 0 && !fits_beside(uint32_t(prev), b);
    if (after_prev && issued_ > uses_) break;
    std::optional<TakenRead> read;
    if (blocks_[b].on_disk) {
      auto r = take_read(issued_, needed_now && issued_ == uses_);
      if (!r) return r.status();
      if (!*r) break;  // still reading: this copy and the later ones wait for a later call
      read = std::move(**r);
    }
    if (after_prev) STRATA_TRY(cuda::stream_wait(copy_, slot_free_[(issued_ - 1) % slots_.size()]));
    if (Status st = issue_copy(b, issued_ % slots_.size(), read); !st) {
      // The use stays unissued; its read was consumed, so the reads posted behind it go too and
      // are posted again in use order (a retry reads the block again).
      if (read) drop_reads();
      return st;
    }
  }
  // The disk uses past the issued ones start reading now, as far as the buffers allow.
  if (reader_) STRATA_TRY(post_reads(last_use, false));
  return Status::ok();
}

Status WeightStore::issue_copy(uint32_t b, size_t slot, const std::optional<TakenRead>& read) {
  if (slot_used_[slot]) STRATA_TRY(cuda::stream_wait(copy_, slot_free_[slot]));
  std::optional<uint32_t> begin;
  if (timeline_) {
    auto m = timeline_->mark(copy_);
    if (!m) return m.status();
    begin = *m;
  }
  if (read) {
    STRATA_TRY(copy_disk(b, slot_addr(slot, b), *read));
  } else if (blocks_[b].from_host) {
    STRATA_TRY(host_copy(b, slot_addr(slot, b)));
  } else {
    STRATA_TRY(copy_pinned(b, slot));
  }
  if (timeline_) {
    auto end = timeline_->mark(copy_);
    if (!end) return end.status();
    timeline_->span("h2d copy", blocks_[b].label, *begin, *end);
  }
  STRATA_TRY(cuda::event_record(ready_[slot], copy_));
  ++stats_.copies;
  stats_.bytes_copied += blocks_[b].bytes;
  return Status::ok();
}

Status WeightStore::copy_pinned(uint32_t b, size_t slot) {
  return cuda::copy_to_device(slot_addr(slot, b), pinned_[b], blocks_[b].bytes, copy_)
      .with_context(fmt::format("streaming block {}", blocks_[b].label));
}

bool WeightStore::graphable(const std::vector<uint32_t>& order) const {
  return std::all_of(order.begin(), order.end(),
                     [&](uint32_t b) { return b < blocks_.size() && !blocks_[b].on_disk && !blocks_[b].from_host; });
}

Status WeightStore::begin_graph_schedule(std::vector<uint32_t> order, bool warm) {
  if (acquired_ || graph_mode_) return Status::error("weight store: graph schedule begun while a block is acquired");
  if (!graphable(order)) return Status::error("weight store: a graph step's blocks must all be pinned");
  g_order_ = std::move(order);
  g_prefetch_ = std::min<uint64_t>(slots_.size() - 1, g_order_.size());
  g_use_ = 0;
  g_issued_ = warm ? g_prefetch_ : 0;
  g_warm_ = warm;
  g_slot_used_.assign(slots_.size(), false);
  // Where each tail slot's event is recorded: at the step's last use of that slot, or, where the
  // next step's first use does not fit beside the step's last one (two-ended ring), at the last use.
  g_tail_use_.assign(g_prefetch_, 0);
  for (uint64_t i = 0; i < g_prefetch_; ++i) {
    const uint64_t s = g_order_.size(), n = slots_.size();
    g_tail_use_[i] = i + (s - 1 - i) / n * n;
    if (!fits_beside(g_order_[s - 1], g_order_[i])) g_tail_use_[i] = s - 1;
  }
  graph_mode_ = true;
  if (g_order_.empty()) return Status::ok();
  // Fork: the copy stream joins the compute stream's capture.
  STRATA_TRY(cuda::event_record(fork_, compute_));
  return cuda::stream_wait(copy_, fork_);
}

Status WeightStore::issue_graph_copies_through(uint64_t last) {
  const uint64_t n = slots_.size();
  for (; g_issued_ <= last && g_issued_ < g_order_.size(); ++g_issued_) {
    const size_t slot = g_issued_ % n;
    // Two-ended ring: after the previous use's release where the two do not fit side by side (the
    // step's first use follows a completed step: nothing to wait for).
    const bool after_prev = g_issued_ > 0 && !fits_beside(g_order_[g_issued_ - 1], g_order_[g_issued_]);
    if (after_prev && g_issued_ > g_use_) break;
    if (after_prev) STRATA_TRY(cuda::stream_wait(copy_, slot_free_[(g_issued_ - 1) % n]));
    if (g_slot_used_[slot]) STRATA_TRY(cuda::stream_wait(copy_, slot_free_[slot]));
    STRATA_TRY(copy_pinned(g_order_[g_issued_], slot));
    STRATA_TRY(cuda::event_record(ready_[slot], copy_));
  }
  return Status::ok();
}

Status WeightStore::end_graph_schedule() {
  if (!graph_mode_ || acquired_) return Status::error("weight store: end_graph_schedule without a graph schedule");
  graph_mode_ = false;
  if (g_use_ != g_order_.size())
    return Status::error("weight store: graph step used {} of its {} blocks", g_use_, g_order_.size());
  if (g_order_.empty()) return Status::ok();
  // Join: the capture ends on the compute stream with the copy stream's work inside it. (The tail
  // is not captured: graph_launched issues it.)
  STRATA_TRY(cuda::event_record(join_, copy_));
  return cuda::stream_wait(compute_, join_);
}

Status WeightStore::before_graph_launch() {
  if (!eager_since_graph_ && !tail_pending_) return Status::ok();
  STRATA_TRY(cuda::event_record(fence_, copy_));
  STRATA_TRY(cuda::stream_wait(compute_, fence_));
  eager_since_graph_ = false;
  tail_pending_ = false;
  return Status::ok();
}

Status WeightStore::graph_launched(const std::vector<uint32_t>& order, bool warm) {
  if (order.empty()) return Status::ok();  // a resident step: the slots keep what they hold
  graphs_since_eager_ = true;
  const uint64_t p = std::min<uint64_t>(slots_.size() - 1, order.size());
  // The tail: the next step's first uses into slots 0..P-1, each after the launched graph's last use
  // of its slot (tail_free_, recorded by the graph); the next graph launch waits for them.
  for (uint64_t i = 0; i < p; ++i) {
    STRATA_TRY(cuda::stream_wait(copy_, tail_free_[i]));
    STRATA_TRY(copy_pinned(order[i], i));
  }
  tail_pending_ = true;
  uint64_t copies = order.size() + (warm ? 0 : p), bytes = 0;
  for (uint32_t b : order) bytes += blocks_[b].bytes;
  for (uint64_t i = 0; i < (warm ? 0 : p); ++i) bytes += blocks_[order[i]].bytes;
  stats_.copies += copies;
  stats_.bytes_copied += bytes;
  prefilled_ = true;
  prefilled_order_ = order;
  return Status::ok();
}

Result<const uint8_t*> WeightStore::acquire(uint32_t block) {
  if (graph_mode_) {
    if (acquired_ || g_use_ >= g_order_.size() || g_order_[g_use_] != block)
      return Status::error("weight store: block {} acquired out of its graph step's schedule", blocks_[block].label);
    STRATA_TRY(issue_graph_copies_through(g_use_ + slots_.size() - 1));
    const size_t slot = g_use_ % slots_.size();
    // A warm step's first uses were copied by the previous graph, which completed before this one began.
    if (!(g_warm_ && g_use_ < g_prefetch_)) STRATA_TRY(cuda::stream_wait(compute_, ready_[slot]));
    acquired_ = true;
    return static_cast<const uint8_t*>(slot_addr(slot, block));
  }
  if (schedule_.empty()) return Status::error("weight store: acquire before set_schedule");
  if (acquired_) return Status::error("weight store: acquire of {} before the previous release", blocks_[block].label);
  const uint32_t expected = schedule_[(uses_ - schedule_base_) % schedule_.size()];
  if (block != expected)
    return Status::error("weight store: block {} acquired out of schedule (expected {})", blocks_[block].label,
                         blocks_[expected].label);
  // Keep ring_slots - 1 uses in flight beyond this one's.
  STRATA_TRY(issue_copies_through(uses_ + slots_.size() - 1, true));
  const size_t slot = uses_ % slots_.size();
  STRATA_TRY(cuda::stream_wait(compute_, ready_[slot]));
  acquired_ = true;
  last_acquired_ = int64_t(block);
  return static_cast<const uint8_t*>(slot_addr(slot, block));
}

Status WeightStore::release(uint32_t block) {
  if (!acquired_) return Status::error("weight store: release of {} without acquire", blocks_[block].label);
  if (graph_mode_) {
    const size_t slot = g_use_ % slots_.size();
    STRATA_TRY(cuda::event_record(slot_free_[slot], compute_));
    // Where the tail (outside the graph) may refill a slot: an event it waits for (g_tail_use_).
    for (uint64_t i = 0; i < g_prefetch_; ++i)
      if (g_tail_use_[i] == g_use_) STRATA_TRY(cuda::event_record_external(tail_free_[i], compute_));
    g_slot_used_[slot] = true;
    acquired_ = false;
    ++g_use_;
    return Status::ok();
  }
  const size_t slot = uses_ % slots_.size();
  STRATA_TRY(cuda::event_record(slot_free_[slot], compute_));
  slot_used_[slot] = true;
  acquired_ = false;
  ++uses_;
  // Copies held back behind a read that has finished since: issue them now (the window of the
  // last acquire, without waiting), and post reads whose buffer has come free.
  if (reader_ && issued_ < uses_ + slots_.size() - 1) STRATA_TRY(issue_copies_through(uses_ + slots_.size() - 2, false));
  return Status::ok();
}

}  // namespace strata::offload
