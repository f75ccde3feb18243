// The disk part of `strata probe`: read bandwidth by queue depth through io/BlockReader, the same
// reader (io_uring + O_DIRECT, or the pread fallback) the NVMe tier uses at run time.
//
// Method. One test file is written and fsync'ed, then split into one region per queue depth, read
// in the order they were written (QD 1 reads the earliest-written region). A virtual disk's host may
// keep recently written data in its own cache, which O_DIRECT in the guest does not bypass; the
// host evicts oldest-first, so the earliest-written regions are the least likely to be served from
// it, and a file of several GiB is larger than what such a host usually keeps per guest. QD 1 reads
// 16 MiB blocks (the reference figure of ../shared/device/README.md: "O_DIRECT sequential read,
// queue depth 1, 16 MiB blocks"); deeper queues read 1 MiB blocks, the size of a staging chunk.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::offload {

struct DiskPoint {
  uint32_t queue_depth = 0;
  uint64_t block_bytes = 0;
  double gbps = 0;
};

struct DiskProbeResult {
  std::vector<DiskPoint> points;  // ascending queue depth
  std::string backend;            // "io_uring, O_DIRECT", "pread pool, page cache", ...
  std::string notice;             // the reader's fallback notice, if any
};

struct DiskProbeOptions {
  std::string dir;                        // where the temp file goes
  uint64_t file_bytes = 4ull << 30;
  std::vector<uint32_t> queue_depths = {1, 2, 4, 8, 16, 32};
  std::string backend = "auto";           // io/BlockReader backend name
  std::function<void(const std::string&)> progress;
};

Result<DiskProbeResult> probe_disk(const DiskProbeOptions& opt);

}  // namespace strata::offload
