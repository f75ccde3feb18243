// What a model file was when strata opened it, so that a file truncated or replaced while the
// engine runs (a re-download, a `cp` over it) is a clear error rather than garbage weights.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace strata::io {

struct FileIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t device = 0, inode = 0;  // a replaced file (rename over it) has a new inode

  static Result<FileIdentity> of_path(const std::string& path);
  static Result<FileIdentity> of_fd(int fd, const std::string& path_for_errors);
  bool operator==(const FileIdentity&) const = default;
};

// Ok when `path` is still the file described by `at_open`; otherwise an error naming the file and
// what changed ("truncated from X to Y bytes", "replaced by another file", "modified").
Status check_unchanged(const std::string& path, const FileIdentity& at_open);

}  // namespace strata::io
