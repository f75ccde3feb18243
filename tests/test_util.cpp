#include "test_util.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace strata::test {

std::string testdata(const std::string& rel) {
  const char* env = std::getenv("STRATA_TESTDATA");
  return std::string(env ? env : STRATA_TESTDATA_DIR) + "/" + rel;
}

std::string fuzz_regression(const std::string& target, const std::string& name) {
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/tests/fuzz/regressions/" + target + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": missing");  // Catch reports it as the test's failure
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::path(STRATA_BINARY_DIR) / "test-scratch" /
             (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

uint64_t fresh_seed() {
  if (const char* s = std::getenv("STRATA_TEST_SEED")) return std::strtoull(s, nullptr, 0);
  static std::atomic<uint64_t> counter{0};
  return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
         (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull);
}

std::vector<float> random_normal(size_t n, Rng& rng, float scale) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.normal() * scale;
  return v;
}

}  // namespace strata::test
