// Job lines: every malformed line gives an error naming the line and the field.
#include <catch2/catch.hpp>

#include <fstream>

#include "batch/job.h"
#include "test_util.h"

using strata::batch::JobDefaults;
using strata::batch::parse_job_line;

namespace {

std::string error_of(const std::string& line) {
  auto r = parse_job_line(line, 7, JobDefaults{}, "/base");
  return r ? std::string("(parsed)") : r.message();
}

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("a full job line takes every field and absent ones take the defaults", "[batch]") {
  JobDefaults d;
  d.instruction = "Summarise.";
  d.max_tokens = 99;
  d.sampling.temperature = 0.5f;
  auto j = parse_job_line(R"({"id":"a","input":{"file":"docs/x.txt"},"template":"Q: {input} A:","max_tokens":12,)"
                          R"("temperature":0,"top_k":5,"top_p":0.5,"min_p":0,"repeat_penalty":1.1,"seed":42})",
                          1, d, "/base");
  REQUIRE(j);
  CHECK(j->id == "a");
  CHECK(j->file == "/base/docs/x.txt");
  CHECK(j->text.empty());
  CHECK(j->prompt_template == "Q: {input} A:");
  CHECK(j->instruction.empty());  // a template replaces the default instruction
  CHECK(j->max_tokens == 12);
  CHECK(j->sampling.temperature == 0.0f);
  CHECK(j->sampling.top_k == 5);
  CHECK(j->sampling.top_p == 0.5f);
  CHECK(j->sampling.repeat_penalty == Approx(1.1f));
  CHECK(j->sampling.seed == 42u);

  auto m = parse_job_line(R"({"id": 17, "input": "hello"})", 2, d, "/base");
  REQUIRE(m);
  CHECK(m->id == "17");
  CHECK(m->text == "hello");
  CHECK(m->instruction == "Summarise.");
  CHECK(m->max_tokens == 99);
  CHECK(m->sampling.temperature == 0.5f);
  CHECK_FALSE(m->sampling.seed.has_value());
  auto abs = parse_job_line(R"({"id":"b","input":{"file":"/abs/y.txt"}})", 3, d, "/base");
  REQUIRE(abs);
  CHECK(abs->file == "/abs/y.txt");
}

TEST_CASE("malformed job lines name the line and the field", "[batch]") {
  struct Case { const char* line; const char* expect; };
  const Case cases[] = {
      {R"({"id":"a","input":"x")", "line 7: invalid JSON at byte"},
      {R"(["id","a"])", "line 7: expected a JSON object, got an array"},
      {R"({"input":"x"})", "line 7: field 'id': missing"},
      {R"({"id":"","input":"x"})", "field 'id': empty"},
      {R"({"id":1.5,"input":"x"})", "field 'id': expected a string or an integer, got a number"},
      {R"({"id":"a"})", "line 7 (id 'a'): field 'input': missing"},
      {R"({"id":"a","input":""})", "field 'input': empty text"},
      {R"({"id":"a","input":3})", "field 'input': expected text or {\"file\": path}, got an integer"},
      {R"({"id":"a","input":{"path":"x"}})", "field 'input': an object must be exactly {\"file\": path}"},
      {R"({"id":"a","input":{"file":""}})", "field 'input.file': expected a non-empty path string"},
      {R"({"id":"a","input":"x","instruction":"s","template":"{input}"})", "give one, not both"},
      {R"({"id":"a","input":"x","template":"no marker"})", "field 'template': has no {input} placeholder"},
      {R"({"id":"a","input":"x","instruction":5})", "field 'instruction': expected a string, got an integer"},
      {R"({"id":"a","input":"x","max_tokens":0})", "field 'max_tokens': 0 is out of range"},
      {R"({"id":"a","input":"x","max_tokens":"9"})", "field 'max_tokens': expected an integer, got string"},
      {R"({"id":"a","input":"x","max_tokens":2.5})", "field 'max_tokens': expected an integer, got a number"},
      {R"({"id":"a","input":"x","temperature":-1})", "field 'temperature': -1 is out of range [0, 100]"},
      {R"({"id":"a","input":"x","top_p":0})", "field 'top_p': 0 is out of range (0, 1]"},
      {R"({"id":"a","input":"x","min_p":1})", "field 'min_p': 1 is out of range [0, 1)"},
      {R"({"id":"a","input":"x","top_k":-2})", "field 'top_k': -2 is out of range"},
      {R"({"id":"a","input":"x","seed":-3})", "field 'seed': expected a non-negative integer, got -3"},
      {R"({"id":"a","input":"x","temprature":0})", "unknown field 'temprature'"},
  };
  for (const auto& c : cases) {
    INFO(c.line);
    const std::string e = error_of(c.line);
    INFO(e);
    CHECK(has(e, c.expect));
    CHECK(e.find('\n') == std::string::npos);
  }
  CHECK(parse_job_line(R"({"id":"a","input":"x","max_tokens":8.0})", 1, {}, "")->max_tokens == 8);
}

TEST_CASE("fuzz regressions: job lines that once crashed the parser", "[batch][fuzz]") {
  // 2e308 overflows double: nlohmann throws out_of_range, not parse_error, and it escaped.
  const std::string e = error_of(strata::test::fuzz_regression("jobs", "number-overflow.json"));
  CHECK(has(e, "line 7: invalid JSON: number overflow parsing '2e308'"));
  CHECK(has(error_of(R"({"id":"a","input":"x","temperature":-1e400})"), "invalid JSON: number overflow"));
  // A float integer field beyond int64 (6.7e19, from the long run on the GPU machine's cores) was
  // converted to int64: undefined behaviour. Both signs, and the first value past the range.
  CHECK(has(error_of(strata::test::fuzz_regression("jobs", "float-beyond-int64.json")),
            "field 'max_tokens': 6.74407e+19 is out of range"));
  CHECK(has(error_of(R"({"id":"a","input":"x","seed":-9.3e18})"), "field 'seed'"));
  CHECK(has(error_of(R"({"id":"a","input":"x","top_k":9223372036854775808.0})"), "field 'top_k':"));
}

TEST_CASE("a jobs file: blank lines skipped and line numbers kept and duplicate ids rejected", "[batch]") {
  const auto dir = strata::test::temp_dir("batch-jobs");
  write_file(dir / "ok.jsonl", "{\"id\":\"a\",\"input\":\"x\"}\r\n\n   \n{\"id\":\"b\",\"input\":{\"file\":\"d/b.txt\"}}");
  auto ok = strata::batch::load_jobs_file((dir / "ok.jsonl").string(), {});
  REQUIRE(ok);
  REQUIRE(ok->size() == 2);
  CHECK((*ok)[1].line == 4);
  CHECK((*ok)[1].file == (dir / "d/b.txt").string());

  write_file(dir / "dup.jsonl", "{\"id\":\"a\",\"input\":\"x\"}\n{\"id\":\"b\",\"input\":\"y\"}\n{\"id\":\"a\",\"input\":\"z\"}\n");
  auto dup = strata::batch::load_jobs_file((dir / "dup.jsonl").string(), {});
  REQUIRE_FALSE(dup);
  CHECK(has(dup.message(), "dup.jsonl: line 3: duplicate id 'a' (first on line 1)"));

  write_file(dir / "bad.jsonl", "{\"id\":\"a\",\"input\":\"x\"}\n{\"id\":\"b\"}\n");
  auto bad = strata::batch::load_jobs_file((dir / "bad.jsonl").string(), {});
  REQUIRE_FALSE(bad);
  CHECK(has(bad.message(), "bad.jsonl: line 2 (id 'b'): field 'input': missing"));

  write_file(dir / "empty.jsonl", "\n\n");
  CHECK(has(strata::batch::load_jobs_file((dir / "empty.jsonl").string(), {}).message(), "no jobs"));
  CHECK(has(strata::batch::load_jobs((dir / "nope.jsonl").string(), {}).message(), "no such jobs file"));
}

TEST_CASE("a folder of documents: one job per file with relative-path ids and hidden files skipped", "[batch]") {
  const auto dir = strata::test::temp_dir("batch-dir");
  write_file(dir / "b.txt", "bee");
  write_file(dir / "a.txt", "ay");
  write_file(dir / "sub/c.md", "sea");
  write_file(dir / ".hidden", "no");
  write_file(dir / ".git/x", "no");
  JobDefaults d;
  d.instruction = "Summarise.";
  auto jobs = strata::batch::load_jobs(dir.string(), d);
  REQUIRE(jobs);
  REQUIRE(jobs->size() == 3);
  CHECK((*jobs)[0].id == "a.txt");
  CHECK((*jobs)[2].id == "sub/c.md");
  CHECK((*jobs)[2].instruction == "Summarise.");
  auto text = strata::batch::read_input((*jobs)[2]);
  REQUIRE(text);
  CHECK(*text == "sea");
  const auto empty = strata::test::temp_dir("batch-dir-empty");
  CHECK(has(strata::batch::load_jobs(empty.string(), d).message(), "no documents"));
}

TEST_CASE("the example jobs file in configs/batch parses and its input file exists", "[batch]") {
  auto jobs = strata::batch::load_jobs_file(std::string(STRATA_SOURCE_DIR) + "/configs/batch/example.jsonl", {});
  REQUIRE(jobs);
  CHECK(jobs->size() == 4);
  for (const auto& j : *jobs) {
    INFO(j.id);
    CHECK(strata::batch::read_input(j));
  }
}

TEST_CASE("mutated job lines never crash and always answer with the line number", "[batch]") {
  const std::string valid =
      R"({"id":"doc-1","input":{"file":"a.txt"},"instruction":"Summarise.","max_tokens":64,"temperature":0.5,"seed":3})";
  strata::Rng rng(strata::test::fresh_seed());
  const std::string alphabet = "{}[]\":,0123456789.-eE \\u\x01\xff\xc3" "abcdefnrtl";
  for (int i = 0; i < 20000; ++i) {
    std::string line = valid;
    const int edits = 1 + int(rng.next_u64() % 4);
    for (int e = 0; e < edits && !line.empty(); ++e) {
      const size_t at = rng.next_u64() % line.size();
      switch (rng.next_u64() % 4) {
        case 0: line[at] = alphabet[rng.next_u64() % alphabet.size()]; break;
        case 1: line.erase(at, 1 + rng.next_u64() % 8); break;
        case 2: line.insert(at, 1, alphabet[rng.next_u64() % alphabet.size()]); break;
        case 3: line.resize(at); break;
      }
    }
    auto r = parse_job_line(line, 3, JobDefaults{}, "");
    if (r) continue;
    INFO(line);
    CHECK(r.message().rfind("line 3", 0) == 0);
    CHECK(r.message().find('\n') == std::string::npos);
  }
}
