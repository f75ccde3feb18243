#include "io/block_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "core/units.h"
#include "io/aligned_buffer.h"
#include "io/crc32c.h"

namespace strata::io {
namespace {

using Clock = std::chrono::steady_clock;

// One read of at most chunk_bytes: [start, start + len) of the file into dst, aligned. The range
// that must arrive is [start, start + need) (the op's exact end may lie before the aligned end, and
// the file may end there too).
struct Chunk {
  size_t op = 0;
  uint64_t start = 0, len = 0, need = 0;
  uint8_t* dst = nullptr;
  uint64_t done = 0;    // bytes from start known to be in dst
  uint64_t resume = 0;  // where the read in flight started, relative to start
  uint32_t retries = 0; // completions without progress (EAGAIN, short read inside one page)
  int fixed_index = -1;
  Clock::time_point submitted;
};

int open_file(const std::string& path, bool direct) {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
}

}  // namespace

Result<Backend> backend_from_name(const std::string& name) {
  if (name == "auto") return Backend::automatic;
  if (name == "io_uring" || name == "uring") return Backend::io_uring;
  if (name == "pread") return Backend::pread;
  return Status::error("unknown io backend '{}' (auto, io_uring, pread)", name);
}

Result<std::unique_ptr<BlockReader>> BlockReader::open(const std::string& path, const ReaderOptions& opt) {
  if (opt.queue_depth == 0 || opt.queue_depth > 4096)
    return Status::error("io queue depth {} is out of range (1..4096)", opt.queue_depth);
  if (opt.chunk_bytes == 0 || opt.chunk_bytes % kDirectAlign != 0 || opt.chunk_bytes > (1u << 30))
    return Status::error("io chunk size {} must be a multiple of 4 KiB, at most 1 GiB", opt.chunk_bytes);
  std::unique_ptr<BlockReader> r(new BlockReader());
  r->path_ = path;
  r->opt_ = opt;

  bool direct_refused = false;
  if (opt.direct != DirectIo::off) {
    r->fd_ = open_file(path, true);
    if (r->fd_ < 0 && errno == EINVAL) {
      if (opt.direct == DirectIo::on)
        return Status::error("{}: the filesystem refuses O_DIRECT (open: {})", path, std::strerror(EINVAL));
      direct_refused = true;
      r->add_notice(fmt::format("io: {}: the filesystem refuses O_DIRECT (open: {}); reading through the page "
                                "cache with a {}-thread pread pool", path, std::strerror(EINVAL), opt.queue_depth));
    } else if (r->fd_ < 0) {
      return Status::error("{}: cannot open: {}", path, std::strerror(errno));
    } else {
      r->direct_ = true;
    }
  }
  if (r->fd_ < 0) {
    r->fd_ = open_file(path, false);
    if (r->fd_ < 0) return Status::error("{}: cannot open: {}", path, std::strerror(errno));
  }
  auto id = FileIdentity::of_fd(r->fd_, path);
  if (!id) return id.status();
  r->identity_ = *id;
  if (opt.expect && !(*opt.expect == r->identity_)) {
    if (auto s = check_unchanged(path, *opt.expect); !s) return s;
    return Status::error("{}: the model file changed since it was loaded (reload the model)", path);
  }

  if (opt.backend == Backend::pread || direct_refused) {
    r->engine_ = make_pread_engine(opt.queue_depth);
  } else {
    auto u = opt.make_uring ? opt.make_uring(opt.queue_depth) : make_uring_engine(opt.queue_depth);
    if (u) {
      r->engine_ = std::move(*u);
    } else if (opt.backend == Backend::io_uring) {
      return Status::error("{}: io_uring is unavailable ({})", path, u.message());
    } else {
      r->add_notice(fmt::format("io: io_uring is unavailable ({}); using a {}-thread pread pool", u.message(),
                                opt.queue_depth));
      r->engine_ = make_pread_engine(opt.queue_depth);
    }
  }
  if (opt.wrap_engine) r->engine_ = opt.wrap_engine(std::move(r->engine_));
  return r;
}

BlockReader::~BlockReader() {
  engine_.reset();  // engines reap their in-flight reads before the descriptor goes
  if (fd_ >= 0) ::close(fd_);
}

std::string BlockReader::backend_name() const {
  return engine_->name() + (direct_ ? ", O_DIRECT" : ", page cache");
}

void BlockReader::add_notice(const std::string& line) {
  log::info("{}", line);
  notice_ += notice_.empty() ? line : "\n" + line;
}

bool BlockReader::register_buffers(std::span<const std::span<uint8_t>> bufs) {
  if (auto s = engine_->register_buffers(bufs); !s) {
    add_notice(fmt::format("io: buffer registration refused ({}); reading without it", s.message()));
    return false;
  }
  registered_.assign(bufs.begin(), bufs.end());
  return true;
}

Status BlockReader::fall_back_to_buffered(const std::string& why) {
  add_notice(fmt::format("io: {}: the filesystem refuses O_DIRECT ({}); reading through the page cache with a "
                         "{}-thread pread pool", path_, why, opt_.queue_depth));
  engine_.reset();
  ::close(fd_);
  direct_ = false;
  fd_ = open_file(path_, false);
  if (fd_ < 0) return Status::error("{}: cannot reopen: {}", path_, std::strerror(errno));
  engine_ = make_pread_engine(opt_.queue_depth);
  if (opt_.wrap_engine) engine_ = opt_.wrap_engine(std::move(engine_));
  registered_.clear();
  return check_unchanged(path_, identity_);
}

Status BlockReader::read(std::span<ReadOp> ops) {
  for (auto& op : ops) op.data = {};
  STRATA_TRY(check_unchanged(path_, identity_));
  for (const auto& op : ops) {
    if (op.offset + op.bytes > identity_.size || op.offset + op.bytes < op.offset)
      return Status::error("{}: {}: range [{}, {}) lies beyond the end of the file ({} bytes)", path_, op.label,
                           op.offset, op.offset + op.bytes, identity_.size);
    STRATA_CHECK(op.buffer.size() >= enclosing_span_bytes(op.offset, op.bytes),
                 "{}: buffer of {} bytes for a span of {}", op.label, op.buffer.size(),
                 enclosing_span_bytes(op.offset, op.bytes));
    STRATA_CHECK(reinterpret_cast<uintptr_t>(op.buffer.data()) % kDirectAlign == 0, "{}: buffer not page-aligned",
                 op.label);
  }
  Status err;
  Outcome o = read_once(ops, err);
  if (o == Outcome::direct_refused) {
    STRATA_TRY(fall_back_to_buffered(fmt::format("read: {}", std::strerror(EINVAL))));
    o = read_once(ops, err);
  }
  if (o != Outcome::ok) return err;
  for (auto& op : ops) {
    const std::span<const uint8_t> exact(op.buffer.data() + op.offset % kDirectAlign, op.bytes);
    if (op.crc32c) {
      const uint32_t got = crc32c(exact);
      if (got != *op.crc32c) {
        for (auto& o2 : ops) o2.data = {};
        return Status::error("{}: {} [offset {}, {} bytes]: checksum mismatch (crc32c {:08x}, expected {:08x}): the "
                             "data on disk is not what was loaded",
                             path_, op.label, op.offset, op.bytes, got, *op.crc32c);
      }
    }
    op.data = exact;
  }
  return Status::ok();
}

BlockReader::Outcome BlockReader::read_once(std::span<ReadOp> ops, Status& error) {
  if (!engine_) { error = Status::error("{}: the io engine failed earlier; reopen the file", path_); return Outcome::failed; }
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    const uint64_t a = align_down(op.offset), exact_end = op.offset + op.bytes, e = align_up(exact_end);
    for (uint64_t pos = a; pos < e; pos += opt_.chunk_bytes) {
      Chunk c;
      c.op = i;
      c.start = pos;
      c.len = std::min(opt_.chunk_bytes, e - pos);
      c.need = std::min(pos + c.len, exact_end) - pos;
      c.dst = op.buffer.data() + (pos - a);
      for (size_t b = 0; b < registered_.size(); ++b)
        if (c.dst >= registered_[b].data() && c.dst + c.len <= registered_[b].data() + registered_[b].size())
          c.fixed_index = int(b);
      chunks.push_back(c);
    }
  }
  auto op_where = [&](const Chunk& c) {
    const auto& op = ops[c.op];
    return fmt::format("{}: {} [offset {}, {} bytes]: read at offset {}", path_, op.label.empty() ? "range" : op.label,
                       op.offset, op.bytes, c.start + c.resume);
  };
  auto submit = [&](size_t idx) {
    Chunk& c = chunks[idx];
    c.resume = direct_ ? align_down(c.done) : c.done;  // O_DIRECT resumes on a page boundary
    c.submitted = Clock::now();
    engine_->submit({fd_, c.start + c.resume, c.len - c.resume, c.dst + c.resume,
                     c.fixed_index, uint64_t(idx)});
  };

  const uint32_t qd = engine_->queue_depth();
  size_t next = 0, in_flight = 0;
  bool failed = false, refused = false;
  while (next < chunks.size() || in_flight > 0) {
    while (!failed && in_flight < qd && next < chunks.size()) { submit(next++); ++in_flight; }
    if (in_flight == 0) break;
    const EngineCompletion comp = engine_->wait();
    if (comp.tag == kEngineBrokenTag) {
      // Reads in flight can no longer be reaped; drop the engine so nothing reuses it.
      error = Status::error("{}: the io engine ({}) failed: {}", path_, engine_->name(), std::strerror(int(-comp.result)));
      (void)engine_.release();  // deliberately leaked: its reads may still be in the kernel
      for (auto& op : ops) op.data = {};
      return Outcome::failed;
    }
    --in_flight;
    if (failed) continue;  // draining after an error: results are ignored
    Chunk& c = chunks[comp.tag];
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - c.submitted).count();
    if (opt_.timeout_ms > 0 && ms > opt_.timeout_ms) {
      error = Status::error("{} took {:.0f} ms, over the {} ms limit (a failing or overloaded disk?)", op_where(c), ms,
                            opt_.timeout_ms);
      failed = true;
      continue;
    }
    if (comp.result == -EINVAL && direct_ && opt_.direct == DirectIo::automatic) {
      refused = failed = true;
      continue;
    }
    if (comp.result == -EAGAIN || comp.result == -EINTR) {
      if (++c.retries > opt_.max_retries) {
        error = Status::error("{} failed: {} after {} retries", op_where(c), std::strerror(int(-comp.result)),
                              opt_.max_retries);
        failed = true;
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(std::min<uint32_t>(50u * c.retries, 2000)));
      submit(comp.tag);
      ++in_flight;
      continue;
    }
    if (comp.result < 0) {
      error = Status::error("{} failed: {}", op_where(c), std::strerror(int(-comp.result)));
      failed = true;
      continue;
    }
    if (comp.result == 0) {  // the chunk is incomplete, or it would not be in flight
      const auto now = FileIdentity::of_path(path_);
      error = Status::error("{} found the end of the file: it had {} bytes when opened{} (truncated since load? "
                            "reload the model)", op_where(c), identity_.size,
                            now ? fmt::format(" and has {} now", now->size) : std::string(", and is gone now"));
      failed = true;
      continue;
    }
    const uint64_t before = c.done;
    c.done = std::max(c.done, c.resume + uint64_t(comp.result));
    if (c.done >= c.need) continue;  // complete (the aligned tail past the file end is not needed)
    // A short read: resubmit the rest.
    if (c.done == before || (direct_ && align_down(c.done) == c.resume)) {
      if (++c.retries > opt_.max_retries) {
        error = Status::error("{} failed: short reads made no progress after {} retries", op_where(c), opt_.max_retries);
        failed = true;
        continue;
      }
    }
    submit(comp.tag);
    ++in_flight;
  }
  if (refused) return Outcome::direct_refused;
  if (failed) {
    for (auto& op : ops) op.data = {};
    return Outcome::failed;
  }
  return Outcome::ok;
}

}  // namespace strata::io
