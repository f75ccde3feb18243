// The strata program end to end: exit codes and messages a user sees.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace {

struct Run {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

Run run_strata(const std::string& args) {
  const auto dir = strata::test::temp_dir("cli");
  const std::string err_path = (dir / "stderr").string();
  const std::string cmd = std::string(STRATA_BINARY_DIR) + "/strata " + args + " 2>" + err_path;
  Run r{};
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

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST_CASE("synth then inspect: text and JSON", "[cli]") {
  const auto dir = strata::test::temp_dir("cli-synth");
  const std::string model = (dir / "tiny.gguf").string();
  auto s = run_strata("synth --arch llama --preset tiny --type q4_0 --no-progress -o " + model);
  INFO(s.err);
  REQUIRE(s.code == 0);
  CHECK(has(s.out, model));
  auto i = run_strata("inspect " + model);
  REQUIRE(i.code == 0);
  CHECK(has(i.out, "architecture:  llama"));
  CHECK(has(i.out, "blk.3.ffn_down.weight"));
  CHECK(has(i.out, "q4_0"));
  CHECK(has(i.out, "model llama, 1024 tokens"));
  CHECK_FALSE(has(i.out, "header only"));
  auto j = run_strata("inspect --json " + model);
  REQUIRE(j.code == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["architecture"] == "llama");
  CHECK(doc["data_present"] == true);
  CHECK(doc["layers"].size() == 4);
  CHECK(doc["tensors"].size() == 3 + 4 * 9);
  CHECK(doc["metadata"]["llama.block_count"] == 4);
}

TEST_CASE("inspect works on a header-only file and says so", "[cli]") {
  const auto dir = strata::test::temp_dir("cli-header");
  const std::string model = (dir / "h.gguf").string();
  // A header-only 27b file, the way `strata plan` users get one before downloading.
  auto s = run_strata("synth --preset 27b --mix q3_k_m --header-only --no-progress -o " + model);
  INFO(s.err);
  REQUIRE(s.code == 0);
  auto i = run_strata("inspect --no-tensors " + model);
  REQUIRE(i.code == 0);
  CHECK(has(i.out, "header only"));
  CHECK(has(i.out, "block_count"));
  CHECK(has(i.out, "62"));
  CHECK(has(i.out, "27.009 B parameters"));
}

TEST_CASE("bad input gives one clear line and a non-zero exit", "[cli]") {
  auto missing = run_strata("inspect /nonexistent.gguf");
  CHECK(missing.code == 1);
  CHECK(has(missing.err, "/nonexistent.gguf: cannot open"));
  auto notgguf = run_strata(std::string("inspect ") + STRATA_SOURCE_DIR + "/CMakeLists.txt");
  CHECK(notgguf.code == 1);
  CHECK(has(notgguf.err, "not a GGUF file"));
  auto arch = run_strata("synth --arch mamba");
  CHECK(arch.code == 2);
  CHECK(has(arch.err, "unknown architecture 'mamba'"));
  auto type = run_strata("synth --type q7_k");
  CHECK(type.code == 2);
  CHECK(has(type.err, "unsupported --type 'q7_k'"));
  auto flag = run_strata("inspect --frobnicate x.gguf");
  CHECK(flag.code != 0);
  CHECK(has(flag.err, "frobnicate"));
  auto none = run_strata("");
  CHECK(none.code != 0);
}
