#include "offload/disk_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "core/units.h"
#include "io/aligned_buffer.h"
#include "io/block_reader.h"

namespace strata::offload {
namespace {

// Writes `bytes` of non-constant data (a compressing or deduplicating host disk would make zeros
// cheap) and fsyncs, so the reads below come from the device, not the guest's page cache.
Status write_test_file(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::error("{}: cannot create the disk test file: {}", path, std::strerror(errno));
  std::vector<uint64_t> chunk(16 * kMiB / 8);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  bool ok = true;
  for (uint64_t off = 0; off < bytes && ok; off += 16 * kMiB) {
    for (auto& w : chunk) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; w = x; }
    const size_t n = size_t(std::min<uint64_t>(16 * kMiB, bytes - off));
    ok = ::write(fd, chunk.data(), n) == ssize_t(n);
  }
  const int err = ok ? (::fsync(fd) == 0 ? 0 : errno) : errno;
  ::close(fd);
  if (!ok || err) return Status::error("{}: writing the disk test file failed: {}", path, std::strerror(err ? err : EIO));
  // Drop the guest page cache's copy (O_DIRECT would bypass it anyway; the pread fallback would not).
  const int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (rfd >= 0) { (void)::posix_fadvise(rfd, 0, 0, POSIX_FADV_DONTNEED); ::close(rfd); }
  return Status::ok();
}

}  // namespace

Result<DiskProbeResult> probe_disk(const DiskProbeOptions& opt) {
  auto backend = io::backend_from_name(opt.backend);
  if (!backend) return backend.status();
  const std::string path = fmt::format("{}/strata-probe-{}.tmp", opt.dir, ::getpid());
  if (opt.progress) opt.progress(fmt::format("disk: writing a {} test file in {}", format_bytes(opt.file_bytes), opt.dir));
  if (auto s = write_test_file(path, opt.file_bytes); !s) { ::unlink(path.c_str()); return s; }
  struct Unlink { std::string p; ~Unlink() { ::unlink(p.c_str()); } } unlink_at_exit{path};

  DiskProbeResult out;
  const uint64_t region = io::align_down(opt.file_bytes / opt.queue_depths.size(), 16 * kMiB);
  if (region == 0) return Status::error("disk test file of {} is too small", format_bytes(opt.file_bytes));
  for (size_t i = 0; i < opt.queue_depths.size(); ++i) {
    const uint32_t qd = opt.queue_depths[i];
    const uint64_t block = qd == 1 ? 16 * kMiB : 1 * kMiB;
    io::ReaderOptions ro;
    ro.backend = *backend;
    ro.queue_depth = qd;
    ro.chunk_bytes = block;
    auto reader = io::BlockReader::open(path, ro);
    if (!reader) return reader.status();
    if (out.backend.empty()) {
      out.backend = (*reader)->backend_name();
      out.notice = (*reader)->notice();
    }
    // Buffers for the reads in flight, reused round-robin: the bytes are discarded, so a slot shared
    // by two reads (possible when one is very slow) would only scramble data nobody looks at.
    const uint32_t slots = 2 * qd;
    auto buf = io::AlignedBuffer::allocate(uint64_t(slots) * block);
    if (!buf) return buf.status();
    std::vector<io::ReadOp> ops(region / block);
    for (size_t k = 0; k < ops.size(); ++k) {
      ops[k].offset = i * region + k * block;
      ops[k].bytes = block;
      ops[k].buffer = buf->span().subspan((k % slots) * block, block);
      ops[k].label = "probe block";
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (auto s = (*reader)->read(ops); !s) return s;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.points.push_back({qd, block, double(region) / sec / 1e9});
  }
  return out;
}

}  // namespace strata::offload
