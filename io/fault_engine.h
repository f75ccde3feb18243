// Fault injection for tests (and for `strata` debugging): wraps a real engine and perturbs the raw
// results of the reads that reach a file offset, so BlockReader's handling of each failure is
// exercised through the same path a failing disk would take.
#pragma once

#include <cstdint>
#include <memory>

#include "io/read_engine.h"

namespace strata::io {

struct FaultPlan {
  enum class Kind {
    none,
    eio,           // reads reaching `at_offset` fail with EIO (after scribbling over the buffer)
    short_reads,   // every read returns a random prefix of what it read (>= 1 byte, often unaligned)
    eagain_storm,  // the first `count` completions are -EAGAIN
    slow,          // every completion is delayed by `delay_ms`
    truncated,     // the file appears to end at `at_offset` (as if truncated after open)
    no_direct,     // O_DIRECT reads fail with EINVAL (a filesystem that accepts the flag at open only)
  };
  Kind kind = Kind::none;
  uint64_t at_offset = 0;
  uint32_t count = 0;
  uint32_t delay_ms = 0;
  uint64_t seed = 1;
};

std::unique_ptr<ReadEngine> make_fault_engine(std::unique_ptr<ReadEngine> inner, FaultPlan plan);

}  // namespace strata::io
