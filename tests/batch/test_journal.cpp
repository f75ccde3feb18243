// The results journal: appends survive reopening, a torn last line is cut away, damage is an error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "batch/job.h"
#include "batch/journal.h"
#include "test_util.h"

using strata::batch::ResultsJournal;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("journal: appended lines are there after reopening and the file is created", "[batch]") {
  const auto dir = strata::test::temp_dir("journal");
  const auto path = dir / "r.jsonl";
  {
    auto j = ResultsJournal::open(path.string());
    REQUIRE(j);
    CHECK(j->done().empty());
    REQUIRE(j->append("a", R"({"id":"a","output":"x"})"));
    REQUIRE(j->append("b", R"({"id":"b","output":"y"})"));
    CHECK(j->has("a"));
  }
  CHECK(slurp(path) == "{\"id\":\"a\",\"output\":\"x\"}\n{\"id\":\"b\",\"output\":\"y\"}\n");
  auto j = ResultsJournal::open(path.string());
  REQUIRE(j);
  CHECK(j->done() == std::set<std::string>{"a", "b"});
}

TEST_CASE("journal: a torn last line is dropped and the file cut back to the last complete line", "[batch]") {
  const auto dir = strata::test::temp_dir("journal-torn");
  const auto path = dir / "r.jsonl";
  const std::string good = "{\"id\":\"a\",\"output\":\"x\"}\n";
  // Every proper prefix of a second line is what a kill in the middle of its write() can leave.
  const std::string second = "{\"id\":\"b\",\"output\":\"y\"}";
  for (size_t cut = 1; cut < second.size(); ++cut) {
    INFO("torn after " << cut << " bytes");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << good << second.substr(0, cut);
    {
      auto j = ResultsJournal::open(path.string());
      REQUIRE(j);
      CHECK(j->done() == std::set<std::string>{"a"});
      CHECK(slurp(path) == good);
      REQUIRE(j->append("b", second));
    }
    CHECK(slurp(path) == good + second + "\n");
  }
  // The whole line without its '\n' is a complete result: kept, and its newline added.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << good << second;
  {
    auto j = ResultsJournal::open(path.string());
    REQUIRE(j);
    CHECK(j->done() == std::set<std::string>{"a", "b"});
    REQUIRE(j->append("c", "{\"id\":\"c\"}"));
  }
  CHECK(slurp(path) == good + second + "\n{\"id\":\"c\"}\n");
  // A file that is nothing but a torn line becomes empty.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "{\"id\":";
  REQUIRE(ResultsJournal::open(path.string()));
  CHECK(std::filesystem::file_size(path) == 0);
}

TEST_CASE("journal: a damaged complete line is an error and not silently dropped", "[batch]") {
  const auto dir = strata::test::temp_dir("journal-bad");
  const auto path = dir / "r.jsonl";
  std::ofstream(path, std::ios::binary) << "{\"id\":\"a\"}\nnot json\n{\"id\":\"c\"}\n";
  auto j = ResultsJournal::open(path.string());
  REQUIRE_FALSE(j);
  CHECK(j.message().find("r.jsonl: line 2: not a result") != std::string::npos);
  CHECK(j.message().find('\n') == std::string::npos);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "{\"id\":\"a\"}\n{\"output\":\"x\"}\n{\"id\":";
  const std::string before = slurp(path);
  auto k = ResultsJournal::open(path.string());
  REQUIRE_FALSE(k);
  CHECK(k.message().find("line 2: not a result") != std::string::npos);
  CHECK(slurp(path) == before);  // a damaged file is left as it is, torn tail included
}

TEST_CASE("journal: a second writer on the same file is refused", "[batch]") {
  const auto dir = strata::test::temp_dir("journal-lock");
  const auto path = (dir / "r.jsonl").string();
  auto first = ResultsJournal::open(path);
  REQUIRE(first);
  auto second = ResultsJournal::open(path);
  REQUIRE_FALSE(second);
  CHECK(second.message().find("another strata batch is writing") != std::string::npos);
}

TEST_CASE("journal: results path errors are clear", "[batch]") {
  const auto dir = strata::test::temp_dir("journal-path");
  auto nodir = ResultsJournal::open((dir / "missing" / "r.jsonl").string());
  REQUIRE_FALSE(nodir);
  CHECK(nodir.message().find("open failed") != std::string::npos);
  auto isdir = ResultsJournal::open(dir.string());
  REQUIRE_FALSE(isdir);
}

TEST_CASE("journal: hostile job ids and input paths never name a file that is written", "[batch]") {
  // Ids and input paths come from the jobs file. Ids are only data in the one results file, and
  // input files are only read: after loading jobs with path-like ids and inputs and appending
  // their results, the only files in the tree are the ones the test wrote plus the results file.
  namespace fs = std::filesystem;
  const auto root = strata::test::temp_dir("hostile-ids");
  const auto dir = root / "run";
  fs::create_directories(dir / "docs");
  std::ofstream(dir / "docs" / "a.txt") << "text";
  std::ofstream(root / "outside.txt") << "outside";
  std::ofstream(dir / "jobs.jsonl") << R"({"id":"../../escape","input":{"file":"../outside.txt"}})" "\n"
                                    << R"({"id":"/tmp/strata-abs-id","input":{"file":"docs/a.txt"}})" "\n"
                                    << R"({"id":"a/../../b\u0000c","input":"inline"})" "\n";
  auto jobs = strata::batch::load_jobs((dir / "jobs.jsonl").string(), {});
  REQUIRE(jobs.is_ok());
  REQUIRE(jobs->size() == 3);
  CHECK(strata::batch::read_input((*jobs)[0]).value() == "outside");  // reading is allowed
  {
    auto j = ResultsJournal::open((dir / "results.jsonl").string());
    REQUIRE(j);
    for (const auto& job : *jobs) {
      nlohmann::json line = {{"id", job.id}, {"output", "x"}};
      REQUIRE(j->append(job.id, line.dump()));
    }
  }
  std::set<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (!e.is_directory()) files.insert(fs::relative(e.path(), root).generic_string());
  CHECK(files == std::set<std::string>{"outside.txt", "run/docs/a.txt", "run/jobs.jsonl", "run/results.jsonl"});
  CHECK_FALSE(fs::exists("/tmp/strata-abs-id"));
  auto again = ResultsJournal::open((dir / "results.jsonl").string());
  REQUIRE(again);
  CHECK(again->has("../../escape"));
  CHECK(again->has(std::string("a/../../b\0c", 11)));
}
