#include "io/file_identity.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace strata::io {
namespace {

FileIdentity from_stat(const struct stat& st) {
  FileIdentity id;
  id.size = uint64_t(st.st_size);
  id.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.device = uint64_t(st.st_dev);
  id.inode = uint64_t(st.st_ino);
  return id;
}

}  // namespace

Result<FileIdentity> FileIdentity::of_path(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::error("{}: {}", path, std::strerror(errno));
  return from_stat(st);
}

Result<FileIdentity> FileIdentity::of_fd(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::error("{}: fstat: {}", path, std::strerror(errno));
  return from_stat(st);
}

Status check_unchanged(const std::string& path, const FileIdentity& was) {
  auto now = FileIdentity::of_path(path);
  if (!now) return Status::error("{}: the model file is gone since it was opened ({})", path, now.message());
  if (now->device != was.device || now->inode != was.inode)
    return Status::error("{}: the model file was replaced by another file since it was opened (reload the model)", path);
  if (now->size != was.size)
    return Status::error("{}: the model file changed size since it was opened: {} bytes then, {} now ({}; reload the model)",
                         path, was.size, now->size, now->size < was.size ? "truncated" : "grown");
  if (now->mtime_ns != was.mtime_ns)
    return Status::error("{}: the model file was modified since it was opened (mtime changed; reload the model)", path);
  return Status::ok();
}

}  // namespace strata::io
