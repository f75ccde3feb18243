#include "core/text_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata {

Result<std::string> read_text_file(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::error("{}: is a directory, expected a {}", path, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("{}: cannot open the {}", path, what);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::error("{}: read error in the {}", path, what);
  return ss.str();
}

}  // namespace strata
