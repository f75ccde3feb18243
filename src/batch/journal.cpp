#include "batch/journal.h"

#include <cerrno>
#include <cstring>
#include <optional>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/log.h"

namespace strata::batch {
namespace {

Status errno_status(const std::string& path, const char* what) {
  return Status::error("{}: {} failed: {}", path, what, std::strerror(errno));
}

// fsync of the folder makes the file's directory entry durable (a new file could otherwise vanish
// in a crash even though its data was fsync'd).
Status fsync_parent(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = std::filesystem::path(".");
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status(dir.string(), "open (to fsync the folder)");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0 && errno != EINVAL) return errno_status(dir.string(), "fsync");  // EINVAL: fs without dir fsync
  return Status::ok();
}

Result<std::string> read_fd(int fd, const std::string& path) {
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_status(path, "read");
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  return text;
}

}  // namespace

Result<ResultsScan> scan_results(std::string_view text, const std::string& name, bool keep_text) {
  ResultsScan scan;
  const size_t last_nl = text.rfind('\n');
  scan.complete_bytes = last_nl == std::string_view::npos ? 0 : last_nl + 1;
  scan.torn_bytes = text.size() - scan.complete_bytes;
  // A line is a JSON object with a non-empty string "id"; anything else is not a result.
  const auto id_of = [](std::string_view line) -> std::optional<std::string> {
    auto doc = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
    auto id = doc.find("id");
    if (id == doc.end() || !id->is_string() || id->get<std::string>().empty()) return std::nullopt;
    return id->get<std::string>();
  };
  size_t pos = 0, line_no = 0;
  while (pos < scan.complete_bytes) {
    const size_t end = text.find('\n', pos);
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    auto id = id_of(line);
    if (!id)
      return Status::error("{}: line {}: not a result (a JSON object with a string \"id\"); the file is damaged — "
                           "repair or remove that line",
                           name, line_no);
    scan.lines.push_back({std::move(*id), line_no, keep_text ? std::string(line) : std::string()});
  }
  if (scan.torn_bytes > 0) {
    const std::string_view tail = text.substr(scan.complete_bytes);
    if (auto id = id_of(tail)) {
      scan.lines.push_back({std::move(*id), line_no + 1, keep_text ? std::string(tail) : std::string()});
      scan.complete_bytes = text.size();
      scan.torn_bytes = 0;
      scan.unterminated = true;
    }
  }
  return scan;
}

Result<ResultsScan> read_results_file(const std::string& path, bool keep_text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(path, "open");
  auto text = read_fd(fd, path);
  ::close(fd);
  if (!text) return text.status();
  return scan_results(*text, path, keep_text);
}

Result<ResultsJournal> ResultsJournal::open(const std::string& path) {
  bool created = false;
  int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    created = fd >= 0;
  }
  if (fd < 0) return errno_status(path, "open");
  ResultsJournal j(path, fd, 0);  // closes fd on every error path below
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_status(path, "fstat");
  if (!S_ISREG(st.st_mode)) return Status::error("{}: the results path is not a regular file", path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return Status::error("{}: another strata batch is writing this results file (give each run or shard its own -o)", path);
    // Some network filesystems have no flock; the journal still works for a single writer.
    log::warn("{}: cannot lock the results file ({}); make sure only one run writes it", path, std::strerror(errno));
  }
  if (created) {
    STRATA_TRY(fsync_parent(path));
    return j;
  }
  auto text = read_fd(fd, path);
  if (!text) return text.status();
  auto scan = scan_results(*text, path, false);
  if (!scan) return scan.status();
  if (scan->torn_bytes > 0) {
    log::warn("{}: dropped a torn last line ({} bytes, from an interrupted run); that job will run again", path,
              scan->torn_bytes);
    if (::ftruncate(fd, off_t(scan->complete_bytes)) != 0) return errno_status(path, "ftruncate");
    if (::fsync(fd) != 0) return errno_status(path, "fsync");
  }
  if (scan->unterminated) {
    log::warn("{}: the last result had no newline; added it", path);
    if (::write(fd, "\n", 1) != 1) return errno_status(path, "write");
    if (::fsync(fd) != 0) return errno_status(path, "fsync");
    scan->complete_bytes += 1;
  }
  j.size_ = scan->complete_bytes;
  for (auto& l : scan->lines) j.done_.insert(std::move(l.id));
  return j;
}

ResultsJournal::ResultsJournal(ResultsJournal&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_), done_(std::move(o.done_)) {
  o.fd_ = -1;
}

ResultsJournal::~ResultsJournal() {
  if (fd_ >= 0) ::close(fd_);  // also releases the flock
}

Status ResultsJournal::append(const std::string& id, std::string_view line) {
  STRATA_CHECK(line.find('\n') == std::string_view::npos, "a result line must not contain a newline");
  std::string buf;
  buf.reserve(line.size() + 1);
  buf.append(line);
  buf.push_back('\n');
  // One write() for the whole line: a kill leaves either nothing or a prefix without '\n' (torn,
  // dropped on the next open). The loop only continues after a short write (disk nearly full).
  size_t off = 0;
  while (off < buf.size()) {
    const ssize_t n = ::write(fd_, buf.data() + off, buf.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = errno_status(path_, "write");
      if (::ftruncate(fd_, off_t(size_)) != 0) log::warn("{}: could not cut back a failed write", path_);
      return s;
    }
    off += size_t(n);
  }
  if (::fsync(fd_) != 0) return errno_status(path_, "fsync");
  size_ += buf.size();
  done_.insert(id);
  return Status::ok();
}

}  // namespace strata::batch
