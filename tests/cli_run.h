// Runs the built `strata` binary for the CLI-level tests: exit code, stdout and stderr apart.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>

#include "test_util.h"

namespace strata::test {

struct CliRun {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// The built binary, or `strata` on PATH where the build tree is absent (the GPU machine's bundle).
inline std::string strata_binary() {
  const std::string built = std::string(STRATA_BINARY_DIR) + "/strata";
  return std::filesystem::exists(built) ? built : "strata";
}

// `strata ARGS` through the shell (args may quote); stderr goes through a file in a fresh temp dir.
inline CliRun run_strata(const std::string& args) {
  const auto dir = temp_dir("cli");
  const std::string err_path = (dir / "stderr").string();
  const std::string cmd = strata_binary() + " " + args + " 2>" + err_path;
  CliRun r{};
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  FILE* e = fopen(err_path.c_str(), "r");
  while (e && (n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
  if (e) fclose(e);
  return r;
}

inline bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace strata::test
