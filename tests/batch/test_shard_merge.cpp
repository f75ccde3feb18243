// --shard partitions ids exactly; batch-merge accepts exactly-once and rejects the rest; map-reduce
// chunk plans cover the input.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "batch/chunking.h"
#include "batch/merge.h"
#include "batch/shard.h"
#include "test_util.h"

using namespace strata::batch;

TEST_CASE("shard: --shard over N = 1..5 puts every id in exactly one shard", "[batch]") {
  strata::Rng rng(strata::test::fresh_seed());
  std::vector<std::string> ids;
  for (int i = 0; i < 500; ++i) ids.push_back("doc-" + std::to_string(i));
  for (int i = 0; i < 100; ++i) ids.push_back(std::to_string(rng.next_u64()));  // fresh ids each run
  ids.push_back("");
  for (uint32_t n = 1; n <= 5; ++n) {
    std::vector<size_t> per_shard(n, 0);
    for (const auto& id : ids) {
      int owners = 0;
      for (uint32_t i = 0; i < n; ++i)
        if (Shard{i, n}.contains(id)) ++owners, ++per_shard[i];
      INFO("id " << id << " N " << n);
      REQUIRE(owners == 1);
    }
    // Balanced enough that no machine gets nothing: 601 ids over 5 shards is ~120 each.
    for (uint32_t i = 0; i < n; ++i) CHECK(per_shard[i] > ids.size() / n / 2);
  }
  // The partition depends on the id only: fixed values guard against an accidental hash change,
  // which would silently re-shard every running job array.
  CHECK(id_hash("") != id_hash("a"));
  CHECK(id_hash("doc-1") == id_hash(std::string("doc-") + "1"));
  // FNV-1a 64 + fmix64, computed independently (Python) for docs/batch.md users who shard by hand.
  CHECK(id_hash("doc-1") == 5220982376712735326ull);
  CHECK(id_hash("") == 17280346270528514342ull);
}

TEST_CASE("shard: parsing of i/N", "[batch]") {
  auto s = parse_shard("2/5");
  REQUIRE(s);
  CHECK(s->index == 2);
  CHECK(s->count == 5);
  for (const char* bad : {"5/5", "1", "/3", "1/", "a/3", "1/0", "-1/3", "1/3/4", "1 /3", ""}) {
    INFO(bad);
    auto r = parse_shard(bad);
    REQUIRE_FALSE(r);
    CHECK(r.message().find("expected i/N") != std::string::npos);
  }
}

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string line(const std::string& id) { return "{\"id\":\"" + id + "\",\"output\":\"o-" + id + "\"}\n"; }

}  // namespace

TEST_CASE("merge: exactly once is merged in jobs order and missing or duplicated or unknown ids fail", "[batch]") {
  const auto dir = strata::test::temp_dir("merge");
  const std::vector<std::string> ids = {"a", "b", "c", "d"};
  std::ofstream(dir / "s0.jsonl") << line("c") << line("a");
  std::ofstream(dir / "s1.jsonl") << line("b") << line("d") << "{\"id\":\"tor";  // torn tail ignored
  const auto out = (dir / "all.jsonl").string();
  auto ok = merge_results({(dir / "s0.jsonl").string(), (dir / "s1.jsonl").string()}, ids, out);
  REQUIRE(ok);
  CHECK(ok->jobs == 4);
  CHECK(ok->torn_inputs == 1);
  CHECK(slurp(out) == line("a") + line("b") + line("c") + line("d"));

  std::filesystem::remove(out);
  auto missing = merge_results({(dir / "s0.jsonl").string()}, ids, out);
  REQUIRE_FALSE(missing);
  CHECK(missing.message().find("2 job id(s) missing: 'b', 'd'") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));  // nothing written on failure

  std::ofstream(dir / "s2.jsonl") << line("a");
  auto dup = merge_results({(dir / "s0.jsonl").string(), (dir / "s1.jsonl").string(), (dir / "s2.jsonl").string()},
                           ids, out);
  REQUIRE_FALSE(dup);
  CHECK(dup.message().find("1 id(s) duplicated: 'a'") != std::string::npos);
  CHECK(dup.message().find("s2.jsonl line 1") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));

  std::ofstream(dir / "s3.jsonl") << line("zzz");
  auto unknown = merge_results({(dir / "s0.jsonl").string(), (dir / "s1.jsonl").string(), (dir / "s3.jsonl").string()},
                               ids, out);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.message().find("1 id(s) not in the jobs: 'zzz'") != std::string::npos);

  auto absent = merge_results({(dir / "nope.jsonl").string()}, ids, out);
  REQUIRE_FALSE(absent);
  CHECK(absent.message().find("nope.jsonl: open failed") != std::string::npos);
}

TEST_CASE("map-reduce chunks cover the input with the asked overlap", "[batch]") {
  strata::Rng rng(strata::test::fresh_seed());
  for (int trial = 0; trial < 200; ++trial) {
    const uint32_t n = uint32_t(rng.next_u64() % 5000), chunk = 1 + uint32_t(rng.next_u64() % 600);
    const uint32_t overlap = uint32_t(rng.next_u64() % chunk);
    INFO("n " << n << " chunk " << chunk << " overlap " << overlap);
    auto spans = plan_chunks(n, chunk, overlap);
    REQUIRE(spans);
    if (n == 0) {
      CHECK(spans->empty());
      continue;
    }
    REQUIRE(!spans->empty());
    CHECK(spans->front().begin == 0);
    CHECK(spans->back().end == n);
    for (size_t i = 0; i < spans->size(); ++i) {
      const auto& s = (*spans)[i];
      CHECK(s.end > s.begin);
      CHECK(s.end - s.begin <= chunk);
      if (i > 0) CHECK(s.begin == (*spans)[i - 1].end - overlap);
      if (i + 1 < spans->size()) CHECK(s.end - s.begin == chunk);  // only the last chunk is short
    }
  }
  CHECK_FALSE(plan_chunks(10, 4, 4));
  CHECK_FALSE(plan_chunks(10, 0, 0));
}
