// The seam under BlockReader: an engine moves aligned byte ranges from a file descriptor into
// memory and reports, per read, the raw result (bytes or -errno) without interpreting it. Short
// reads, EAGAIN, end of file and errors are BlockReader's business, so that the fault-injecting
// engine (fault_engine.h) exercises exactly the code that real faults would.
//
// Engines: io_uring (uring_engine.cpp), a pread thread pool (pread_engine.cpp), and a wrapper
// that injects faults. Not thread-safe: one thread submits and waits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace strata::io {

struct EngineRead {
  int fd = -1;
  uint64_t offset = 0;   // file offset
  uint64_t bytes = 0;
  uint8_t* dst = nullptr;
  int fixed_index = -1;  // a registered buffer holding [dst, dst + bytes), or -1
  uint64_t tag = 0;      // returned with the completion
};

// The tag of a completion that belongs to no read: the engine itself failed (io_uring_wait_cqe
// error) and reads in flight can no longer be accounted for.
inline constexpr uint64_t kEngineBrokenTag = ~uint64_t(0);

struct EngineCompletion {
  uint64_t tag = 0;
  int64_t result = 0;  // bytes read (may be short, 0 at end of file) or -errno
};

class ReadEngine {
 public:
  virtual ~ReadEngine() = default;
  virtual std::string name() const = 0;
  virtual uint32_t queue_depth() const = 0;
  // Queues a read; the caller keeps at most queue_depth() in flight. An engine may defer the
  // submission to wait() so that reads go to the kernel in batches.
  virtual void submit(const EngineRead& r) = 0;
  // Blocks until one submitted read completes. Only called with at least one read in flight.
  virtual EngineCompletion wait() = 0;
  // Registers buffers for fixed reads; their indices are the positions in `bufs`. An error means
  // "read without registration" (unsupported, or RLIMIT_MEMLOCK too low), never a failure.
  virtual Status register_buffers(std::span<const std::span<uint8_t>> bufs) {
    return Status::error("{} has no registered buffers", name());
  }
};

// io_uring with `queue_depth` entries. Error (with the errno's text) when the kernel or a seccomp
// policy refuses io_uring: EPERM/ENOSYS in many containers, or a build without liburing.
Result<std::unique_ptr<ReadEngine>> make_uring_engine(uint32_t queue_depth);
// `threads` workers doing pread(2); always available.
std::unique_ptr<ReadEngine> make_pread_engine(uint32_t threads);

}  // namespace strata::io
