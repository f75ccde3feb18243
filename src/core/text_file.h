// Reading a whole text file the user named (a prompt, a jobs file, a document), with one-line
// errors that say which kind of file it was.
#pragma once

#include <string>

#include "core/status.h"

namespace strata {

// The file's bytes. Errors: "PATH: is a directory, expected a WHAT", "PATH: cannot open the WHAT",
// "PATH: read error in the WHAT".
Result<std::string> read_text_file(const std::string& path, const char* what);

}  // namespace strata
