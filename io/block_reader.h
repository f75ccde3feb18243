// BlockReader: reads byte ranges of one file (tensor data of a GGUF model) into page-aligned
// buffers the caller owns, for the NVMe tier (DESIGN.md, "io/").
//
// Each range is read as the 4 KiB-aligned span that encloses it (GGUF aligns tensors to 32 B, but
// O_DIRECT wants 4 KiB) and split into chunks of `chunk_bytes`, up to `queue_depth` in flight; the
// exact range is handed on as a span inside the caller's buffer.
//
// Backends: io_uring with O_DIRECT by default. Automatic fallbacks, each announced once with a
// one-line notice (notice()):
//   - io_uring refused (EPERM/ENOSYS from io_uring_queue_init, common in containers): pread pool;
//   - the filesystem refuses O_DIRECT (EINVAL at open or at the first read; tmpfs, some FUSE/9p):
//     buffered reads through the page cache with the pread pool.
// ReaderOptions::backend / direct force a choice; a forced choice that is unavailable is an error.
//
// Failures: EIO, end of file before the range ends (the file was truncated), EAGAIN beyond
// `max_retries`, a read slower than `timeout_ms`, a checksum mismatch, or a file that changed since
// it was opened (size, mtime, inode; checked before every batch) give an error naming the file, the
// block label and the offset. A failed batch hands on nothing: every op's `data` stays empty.
// Short reads and transient EAGAIN are retried (the rest of the chunk is resubmitted).
//
// Lifetime and threads: read() blocks until every read it started has completed, so buffers are
// never written after it returns (also on error). One BlockReader is used by one thread at a time;
// use one per io thread for parallel readers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/file_identity.h"
#include "io/read_engine.h"

namespace strata::io {

enum class Backend { automatic, io_uring, pread };
enum class DirectIo { automatic, on, off };  // automatic: O_DIRECT unless the filesystem refuses it

Result<Backend> backend_from_name(const std::string& name);  // "auto", "io_uring", "pread"

struct ReaderOptions {
  Backend backend = Backend::automatic;
  DirectIo direct = DirectIo::automatic;
  uint32_t queue_depth = 8;           // reads in flight (io_uring entries, or pread threads)
  uint64_t chunk_bytes = 4 << 20;     // largest single read; a multiple of 4 KiB
  uint32_t max_retries = 16;          // per chunk: EAGAIN or short reads without progress
  uint32_t timeout_ms = 0;            // a read slower than this fails the batch (0: no limit)
  std::optional<FileIdentity> expect; // the file as the model loader saw it (else: as at open)

  // Tests: replace how the io_uring engine is made (to simulate EPERM) and wrap the chosen engine
  // (fault injection, fault_engine.h).
  std::function<Result<std::unique_ptr<ReadEngine>>(uint32_t queue_depth)> make_uring;
  std::function<std::unique_ptr<ReadEngine>(std::unique_ptr<ReadEngine>)> wrap_engine;
};

struct ReadOp {
  uint64_t offset = 0, bytes = 0;  // the exact range in the file
  std::span<uint8_t> buffer;       // page-aligned, >= enclosing_span_bytes(offset, bytes)
  std::string label;               // the block, for messages ("blk.7.ffn", "tensor x")
  std::optional<uint32_t> crc32c;  // when set, the exact range must have this CRC-32C
  std::span<const uint8_t> data;   // out: the exact range inside `buffer` (empty unless read ok)
};

class BlockReader {
 public:
  static Result<std::unique_ptr<BlockReader>> open(const std::string& path, const ReaderOptions& opt = {});
  ~BlockReader();
  BlockReader(const BlockReader&) = delete;
  BlockReader& operator=(const BlockReader&) = delete;

  // Reads every op (in any order, up to queue_depth at once). All-or-nothing, see above.
  Status read(std::span<ReadOp> ops);
  Status read(ReadOp& op) { return read(std::span(&op, 1)); }

  // Registers long-lived buffers with io_uring for fixed reads (fewer page pins per read). Returns
  // false, with a notice, where that is refused or unsupported; reads work either way.
  bool register_buffers(std::span<const std::span<uint8_t>> bufs);

  const std::string& path() const { return path_; }
  const FileIdentity& identity() const { return identity_; }
  std::string backend_name() const;
  bool direct() const { return direct_; }
  uint32_t queue_depth() const { return engine_->queue_depth(); }
  const std::string& notice() const { return notice_; }  // empty when nothing fell back

 private:
  BlockReader() = default;
  enum class Outcome { ok, failed, direct_refused };
  Outcome read_once(std::span<ReadOp> ops, Status& error);
  Status fall_back_to_buffered(const std::string& why);
  void add_notice(const std::string& line);

  std::string path_;
  ReaderOptions opt_;
  FileIdentity identity_;
  int fd_ = -1;
  bool direct_ = false;
  std::unique_ptr<ReadEngine> engine_;
  std::string notice_;
  std::vector<std::span<uint8_t>> registered_;
};

}  // namespace strata::io
