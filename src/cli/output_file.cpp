#include "cli/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace strata::cli {

Status write_output_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".partial";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::error("{}: cannot write ({})", path, std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int err = errno;
  if (std::fclose(f) != 0 || !wrote) {
    std::remove(tmp.c_str());
    return Status::error("{}: cannot write ({})", path, std::strerror(wrote ? errno : err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return Status::error("{}: cannot write ({})", path, std::strerror(e));
  }
  return Status::ok();
}

}  // namespace strata::cli
