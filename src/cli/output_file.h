// Result files the benchmarks write (--json, --svg): written whole, then renamed into place, so a
// reader never sees half a file and a failed run leaves no torn output behind.
#pragma once

#include <string>

#include "core/status.h"

namespace strata::cli {

// Error: "PATH: cannot write (reason)".
Status write_output_file(const std::string& path, const std::string& text);

}  // namespace strata::cli
