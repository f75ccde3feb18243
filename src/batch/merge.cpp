#include "batch/merge.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "batch/job.h"
#include "batch/journal.h"
#include "core/log.h"

namespace strata::batch {
namespace {

struct Where {
  size_t input;
  size_t line;
};

// "'a', 'b', 'c' and 4 more": names enough ids to act on without flooding the terminal.
std::string some_ids(const std::vector<std::string>& ids) {
  std::string s;
  const size_t show = std::min<size_t>(ids.size(), 5);
  for (size_t i = 0; i < show; ++i) s += fmt::format("{}'{}'", i ? ", " : "", printable(ids[i]));
  if (ids.size() > show) s += fmt::format(" and {} more", ids.size() - show);
  return s;
}

Status write_atomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error("{}: cannot create: {}", tmp, std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = Status::error("{}: write failed: {}", tmp, std::strerror(errno));
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    off += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::error("{}: fsync failed: {}", tmp, std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::error("{}: rename failed: {}", path, std::strerror(errno));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

}  // namespace

Result<MergeStats> merge_results(const std::vector<std::string>& inputs, const std::vector<std::string>& expected_ids,
                                 const std::string& out_path) {
  MergeStats stats;
  stats.jobs = expected_ids.size();
  stats.inputs = inputs.size();
  std::map<std::string, size_t> expected;  // id -> position in the output
  for (size_t i = 0; i < expected_ids.size(); ++i) expected.emplace(expected_ids[i], i);

  std::vector<std::string> out_lines(expected_ids.size());
  std::vector<bool> have(expected_ids.size(), false);
  std::map<std::string, Where> first;  // where each id was first seen
  std::vector<std::string> duplicates, unknown;
  std::string first_dup_detail;
  for (size_t f = 0; f < inputs.size(); ++f) {
    auto scan = read_results_file(inputs[f], true);
    if (!scan) return scan.status();
    if (scan->torn_bytes > 0) {
      log::warn("{}: ignoring a torn last line ({} bytes; rerun that shard to finish its job)", inputs[f],
                scan->torn_bytes);
      ++stats.torn_inputs;
    }
    for (auto& l : scan->lines) {
      auto [it, fresh] = first.emplace(l.id, Where{f, l.line});
      if (!fresh) {
        if (duplicates.empty())
          first_dup_detail = fmt::format(" ('{}' in {} line {} and {} line {})", printable(l.id), inputs[it->second.input],
                                         it->second.line, inputs[f], l.line);
        duplicates.push_back(l.id);
        continue;
      }
      auto e = expected.find(l.id);
      if (e == expected.end()) {
        unknown.push_back(l.id);
        continue;
      }
      out_lines[e->second] = std::move(l.text);
      have[e->second] = true;
    }
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < expected_ids.size(); ++i)
    if (!have[i]) missing.push_back(expected_ids[i]);

  std::vector<std::string> problems;
  if (!missing.empty())
    problems.push_back(fmt::format("{} job id(s) missing: {}", missing.size(), some_ids(missing)));
  if (!duplicates.empty())
    problems.push_back(fmt::format("{} id(s) duplicated: {}{}", duplicates.size(), some_ids(duplicates), first_dup_detail));
  if (!unknown.empty())
    problems.push_back(fmt::format("{} id(s) not in the jobs: {}", unknown.size(), some_ids(unknown)));
  if (!problems.empty()) {
    std::string msg = "merge failed: ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    return Status::error("{} (nothing written)", msg);
  }
  std::string data;
  for (const auto& l : out_lines) data += l + "\n";
  STRATA_TRY(write_atomically(out_path, data));
  return stats;
}

}  // namespace strata::batch
