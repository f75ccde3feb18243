// Pinned (page-locked) host memory for everything the executor moves, under one budget: streamed
// blocks' pinned copies, the disk tier's and host-sourced blocks' bounce buffers, the loader's
// staging. Every pinned byte is counted against the budget (`--pinned`), and an allocation past it
// is refused with what it was for and how much is already pinned.
//
// BounceRing: a few buffers of the pool used round robin for host -> device copies (the disk tier
// reads into one while the previous one's copies run; the loader likewise). acquire() hands out the
// next buffer once the copies enqueued from its previous use have completed; a host wait on that
// buffer's event only, never on a stream. The disk tier numbers its uses instead (buffer(i),
// copied(i)): its reads fill buffers on an io thread (offload/io_thread.h).
//
// Not thread-safe: one executor owns a pool. Buffers are page-aligned (O_DIRECT reads land in
// them; cudaMallocHost does not promise page alignment, so each allocation carries up to a page of
// slack, which counts too).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/cuda_api.h"

namespace strata::offload {

// Test hook for the pinned-allocation failure path (a real refusal needs a host out of lockable
// memory): the nth pinned allocation any pool makes from now on (1 = the next) fails as if the
// driver refused it, once; 0 disarms. Not for concurrent use with allocations.
void inject_pinned_alloc_failure(uint32_t nth);

class PinnedPool {
 public:
  explicit PinnedPool(uint64_t budget_bytes) : budget_(budget_bytes) {}  // 0: no budget
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // `bytes` of pinned memory, owned by the pool until release() or the pool's end; page_aligned:
  // for O_DIRECT reads (up to a page of slack, counted). Errors: the budget (naming `what`, the
  // size and what is pinned already) or the driver's refusal.
  Result<uint8_t*> alloc(uint64_t bytes, std::string_view what, bool page_aligned = true);
  void release(uint8_t* p);  // p from alloc(); null is ignored
  uint64_t used_bytes() const { return used_; }
  uint64_t peak_bytes() const { return peak_; }
  uint64_t budget_bytes() const { return budget_; }

 private:
  struct Allocation {
    void* raw = nullptr;
    uint8_t* base = nullptr;
    uint64_t bytes = 0;  // counted: the request plus the alignment slack
  };
  uint64_t budget_ = 0, used_ = 0, peak_ = 0;
  std::vector<Allocation> live_;
};

class BounceRing {
 public:
  // n buffers of `bytes` each from the pool (errors name `what`).
  static Result<std::unique_ptr<BounceRing>> create(PinnedPool& pool, uint32_t n, uint64_t bytes, std::string_view what);
  ~BounceRing();  // waits for copies still reading a buffer, then gives the buffers back
  BounceRing(const BounceRing&) = delete;
  BounceRing& operator=(const BounceRing&) = delete;

  // The next buffer, once the copies from its previous use are done.
  Result<uint8_t*> acquire();
  // After the copies from the buffer acquire() returned were enqueued on s: marks their end.
  Status copies_enqueued(kernels::cuda::Stream s);

  // Numbered use, for a user that fills buffers on another thread ahead of their copies (the disk
  // tier's io thread): use i is buffer i % size(). Before handing buffer i to the filler, the
  // owning thread checks copied(i) (or waits, wait_copied(i)): the copies last enqueued from that
  // buffer are done. After enqueuing use i's copies: copies_enqueued(i, s). A ring is used either
  // this way or through acquire(), not both.
  uint32_t size() const { return uint32_t(buf_.size()); }
  uint8_t* buffer(uint64_t i) const { return buf_[i % buf_.size()].base; }
  Result<bool> copied(uint64_t i) const;
  Status wait_copied(uint64_t i) const;
  Status copies_enqueued(uint64_t i, kernels::cuda::Stream s);
  uint64_t buffer_bytes() const { return bytes_; }
  std::vector<std::span<uint8_t>> buffers() const;  // for registering with the reader

 private:
  BounceRing(PinnedPool& pool, uint64_t bytes) : pool_(pool), bytes_(bytes) {}
  struct Buffer {
    uint8_t* base = nullptr;
    kernels::cuda::Event copied = nullptr;
    bool busy = false;  // `copied` recorded and maybe not complete
  };
  PinnedPool& pool_;
  uint64_t bytes_ = 0;
  std::vector<Buffer> buf_;
  uint64_t uses_ = 0;
};

}  // namespace strata::offload
