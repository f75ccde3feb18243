// WeightStore's disk tier: reads of on_disk blocks on the io thread, into the two bounce buffers,
// handed back through futures (weight_store.h, "Disk tier").
#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "io/aligned_buffer.h"
#include "offload/weight_store.h"

namespace strata::offload {

namespace cuda = kernels::cuda;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Status WeightStore::open_disk(const DiskSource& disk) {
  auto r = io::BlockReader::open(disk.path, disk.reader);
  if (!r) return r.status().with_context("disk tier");
  reader_ = std::move(r.value());
  // Each tensor is read as its enclosing 4 KiB-aligned span, placed back to back in the bounce buffer.
  uint64_t bounce_bytes = 0;
  bounce_offset_.resize(blocks_.size());
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (!blocks_[b].on_disk) continue;
    uint64_t off = 0;
    for (const auto& t : blocks_[b].tensors) {
      bounce_offset_[b].push_back(off);
      off += io::enclosing_span_bytes(t.file_offset, t.bytes);
    }
    bounce_bytes = std::max(bounce_bytes, off);
  }
  auto ring = BounceRing::create(*pool_, 2, bounce_bytes, "the disk tier");
  if (!ring) return ring.status();
  bounce_ = std::move(ring.value());
  reader_->register_buffers(bounce_->buffers());
  disk_notice_ = reader_->notice();
  if (!disk_notice_.empty()) log::info("{}", disk_notice_);
  io_ = std::make_unique<IoThread>();  // from here on only the io thread touches reader_
  return Status::ok();
}

std::string WeightStore::disk_notice() const {
  std::lock_guard<std::mutex> lock(disk_mu_);
  return disk_notice_;
}

WeightStore::Stats WeightStore::stats() const {
  Stats s = stats_;
  std::lock_guard<std::mutex> lock(disk_mu_);
  s.disk_reads = disk_stats_.disk_reads;
  s.disk_bytes = disk_stats_.disk_bytes;
  s.disk_seconds = disk_stats_.disk_seconds;
  return s;
}

Status WeightStore::post_reads(uint64_t last_use, bool wait_first) {
  for (uint64_t u = std::max(read_scan_, issued_); u <= last_use; ++u) {
    const uint32_t b = schedule_[(u - schedule_base_) % schedule_.size()];
    if (!blocks_[b].on_disk) {
      read_scan_ = u + 1;
      continue;
    }
    if (reads_.size() >= bounce_->size()) return Status::ok();
    // The buffer is free once the copies from its last read are done: checked here, on the
    // enqueuing thread (no CUDA call on the io thread); waited for only when the read is needed now.
    const uint64_t seq = reads_posted_;
    if (wait_first && u == issued_) {
      STRATA_TRY(bounce_->wait_copied(seq));
    } else {
      auto free = bounce_->copied(seq);
      if (!free) return free.status();
      if (!*free) return Status::ok();  // a later call posts it
    }
    const auto& blk = blocks_[b];
    std::vector<io::ReadOp> ops(blk.tensors.size());
    uint8_t* base = bounce_->buffer(seq);
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& t = blk.tensors[i];
      const uint64_t span = io::enclosing_span_bytes(t.file_offset, t.bytes);
      ops[i] = {t.file_offset, t.bytes, {base + bounce_offset_[b][i], span}, blk.label, std::nullopt, {}};
    }
    Trace* trace = timeline_ ? &timeline_->trace() : nullptr;
    // The job reads blocks_ (fixed after create), reader_ and its buffer; the store outlives it
    // (~WeightStore joins the io thread first).
    auto done = io_->post([this, b, trace, ops = std::move(ops)]() mutable {
      const auto& blk = blocks_[b];
      const double t0 = trace ? trace->now_us() : 0;
      const auto w0 = std::chrono::steady_clock::now();
      DiskRead r;
      r.status = reader_->read(ops).with_context(fmt::format("disk tier, block {}", blk.label));
      const double s = seconds_since(w0);
      if (trace) trace->span_until_now("disk read", blk.label, t0);
      for (const auto& op : ops) r.data.push_back(op.data);
      std::lock_guard<std::mutex> lock(disk_mu_);
      if (r.status.is_ok()) {
        disk_stats_.disk_seconds += s;
        ++disk_stats_.disk_reads;
        disk_stats_.disk_bytes += blk.bytes;
      }
      disk_notice_ = reader_->notice();
      return r;
    });
    reads_.push_back({u, seq, std::move(done)});
    ++reads_posted_;
    read_scan_ = u + 1;
  }
  return Status::ok();
}

Result<std::optional<WeightStore::TakenRead>> WeightStore::take_read(uint64_t use, bool needed) {
  STRATA_TRY(post_reads(use, needed));
  if (needed && (reads_.empty() || reads_.front().use != use)) {
    // Not expected (every path that leaves a use unissued drops the reads behind it); rather
    // than fail, post this read again at the head of the order.
    drop_reads();
    STRATA_TRY(post_reads(use, true));
  }
  if (reads_.empty() || reads_.front().use != use) {
    STRATA_CHECK(!needed, "disk tier: the read of use {} could not be posted", use);
    return std::optional<TakenRead>();
  }
  PendingRead& front = reads_.front();
  if (needed) {
    const auto w0 = std::chrono::steady_clock::now();
    front.done.wait();
    stats_.disk_wait_seconds += seconds_since(w0);
  } else if (front.done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return std::optional<TakenRead>();
  }
  const uint64_t seq = front.seq;
  DiskRead r = front.done.get();
  reads_.pop_front();
  if (!r.status) {
    drop_reads();  // the reads after it were posted in use order behind it: post them again
    return r.status;
  }
  return std::optional<TakenRead>(TakenRead{seq, std::move(r.data)});
}

Status WeightStore::copy_disk(uint32_t b, uint8_t* slot, const TakenRead& read) {
  const auto& blk = blocks_[b];
  for (size_t i = 0; i < blk.tensors.size(); ++i)
    STRATA_TRY(cuda::copy_to_device(slot + blk.tensors[i].offset, read.data[i].data(), blk.tensors[i].bytes, copy_));
  return bounce_->copies_enqueued(read.seq, copy_);
}

void WeightStore::drop_reads() {
  // Unused reads finish on the io thread; a later read into the same buffer runs after them.
  reads_.clear();
  read_scan_ = issued_;
}

}  // namespace strata::offload
