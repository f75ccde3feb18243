// strata batch end to end: crash safety under SIGKILL, SIGTERM/SIGINT, shards + merge, long inputs,
// bad job files. Runs the real binary on a tiny synthetic model with greedy decoding.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/rng.h"
#include "test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using strata::test::has;

// Starts `strata args...` with stdout/stderr redirected to files; returns the pid.
pid_t spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  std::vector<std::string> argv_s = {std::string(STRATA_BINARY_DIR) + "/strata"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

struct Exit {
  bool signaled = false;
  int code = -1;  // exit status, or the signal number when signaled
};

Exit wait_for(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (WIFSIGNALED(st)) return {true, WTERMSIG(st)};
  return {false, WEXITSTATUS(st)};
}

struct Run {
  int code;
  std::string out, err;
};

Run run(const std::vector<std::string>& args) {
  const auto dir = strata::test::temp_dir("batch-run");
  const pid_t pid = spawn(args, dir / "out", dir / "err");
  const Exit e = wait_for(pid);
  return {e.signaled ? 128 + e.code : e.code, slurp(dir / "out"), slurp(dir / "err")};
}

// Results file -> id -> output; fails the test on a duplicate id or a line that is not JSON.
std::map<std::string, std::string> outputs(const fs::path& results) {
  std::map<std::string, std::string> m;
  std::istringstream in(slurp(results));
  std::string line;
  while (std::getline(in, line)) {
    const json r = json::parse(line);
    INFO(line);
    REQUIRE(m.emplace(r.at("id").get<std::string>(), r.at("output").get<std::string>()).second);
  }
  return m;
}

uint64_t size_or_zero(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

size_t count_lines(const fs::path& p) {
  const std::string s = slurp(p);
  return size_t(std::count(s.begin(), s.end(), '\n'));
}

// A tiny synthetic llama and a jobs file shared by the tests of this file.
struct Fixture {
  fs::path dir, model, jobs;
  std::vector<std::string> ids;
  Fixture() {
    dir = strata::test::temp_dir("batch-cli");
    model = dir / "tiny.gguf";
    auto s = run({"synth", "--arch", "llama", "--preset", "tiny", "--type", "q8_0", "--no-progress", "-o", model.string()});
    INFO(s.err);
    REQUIRE(s.code == 0);
    jobs = dir / "jobs.jsonl";
    std::ofstream f(jobs);
    for (int i = 0; i < 40; ++i) {
      json j = {{"id", "job-" + std::to_string(i)},
                {"input", "document " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog " +
                              std::to_string(i * 7919 % 1000)},
                {"instruction", "Summarise:"},
                {"max_tokens", 10 + i % 7}};
      if (i % 5 == 0) j["temperature"] = 1.0;  // sampled, seed derived from the id: must also repeat
      if (i % 10 == 0) j["seed"] = i;
      f << j.dump() << "\n";
      ids.push_back(j["id"]);
    }
  }
  std::vector<std::string> batch_args(const fs::path& out, std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"batch", jobs.string(), "-o", out.string(), "-m", model.string(),
                                  "--temp", "0", "--no-progress", "-t", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

const Fixture& fixture() {
  static Fixture f;
  return f;
}

double g_reference_s = 0;

// The uninterrupted run every other run is compared with.
const std::map<std::string, std::string>& reference() {
  static const auto ref = [] {
    const auto& fx = fixture();
    const fs::path out = fx.dir / "reference.jsonl";
    const auto t0 = Clock::now();
    auto r = run(fx.batch_args(out));
    g_reference_s = std::chrono::duration<double>(Clock::now() - t0).count();
    INFO(r.err);
    REQUIRE(r.code == 0);
    return outputs(out);
  }();
  return ref;
}

double reference_seconds() {
  reference();
  return g_reference_s;
}

}  // namespace

TEST_CASE("batch: an uninterrupted run writes every job once with its fields and a rerun skips them", "[cli][batch]") {
  const auto& fx = fixture();
  const auto& ref = reference();
  REQUIRE(ref.size() == fx.ids.size());
  const auto line = slurp(fx.dir / "reference.jsonl").substr(0, slurp(fx.dir / "reference.jsonl").find('\n'));
  const json r = json::parse(line);
  CHECK(r["id"] == "job-0");
  CHECK(r["prompt_tokens"].get<int>() > 5);
  CHECK(r["output_tokens"].get<int>() <= 10);
  CHECK(r["timings"]["decode_ms"].is_number());
  CHECK(r["acceptance"].is_null());
  CHECK(r["placement"]["device"] == "cpu");
  size_t nonempty = 0;
  for (const auto& [id, out] : ref) nonempty += !out.empty();
  CHECK(nonempty > ref.size() / 2);  // the comparison below is not between empty strings

  const fs::path out = fx.dir / "rerun.jsonl";
  fs::copy_file(fx.dir / "reference.jsonl", out, fs::copy_options::overwrite_existing);
  const auto size = fs::file_size(out);
  auto again = run(fx.batch_args(out));
  CHECK(again.code == 0);
  CHECK(has(again.err, "nothing to do"));
  CHECK(fs::file_size(out) == size);
}

TEST_CASE("batch: killed with SIGKILL at 20+ random points and resumed each time ends identical to an uninterrupted run",
          "[cli][batch]") {
  const auto& fx = fixture();
  const auto& ref = reference();
  // Time the start-up and one job, to spread the kills over start-up, prefill, decode, the gap
  // between jobs and (rarely) the append itself.
  const auto one_dir = strata::test::temp_dir("batch-one");
  std::ofstream(one_dir / "one.jsonl") << "{\"id\":\"x\",\"input\":\"a b c\",\"max_tokens\":13}\n";
  auto t0 = Clock::now();
  REQUIRE(run({"batch", (one_dir / "one.jsonl").string(), "-o", (one_dir / "r.jsonl").string(), "-m",
               fx.model.string(), "--temp", "0", "--no-progress", "-t", "1"}).code == 0);
  const double t_one = std::chrono::duration<double>(Clock::now() - t0).count();
  const double t_job = std::max(1e-3, (reference_seconds() - t_one) / double(fx.ids.size() - 1));
  const double t_start = std::max(0.0, t_one - t_job);

  const uint64_t seed = strata::test::fresh_seed();
  INFO("seed " << seed << " (STRATA_TEST_SEED reproduces the kill times)");
  strata::Rng rng(seed);
  int kills = 0, rounds = 0, runs = 0;
  size_t killed_mid_run = 0;  // kills that found some but not all results written
  bool torn_injected = false, torn_noticed = false;
  // Rounds of (fresh results file, kill/resume until a run completes), until 24 kills happened:
  // every round ends compared with the uninterrupted run.
  while (kills < 24) {
    REQUIRE(++rounds < 20);
    const auto dir = strata::test::temp_dir("batch-crash");
    const fs::path results = dir / "results.jsonl";
    size_t lines_before = 0;
    for (bool finished = false; !finished;) {
      REQUIRE(++runs < 300);
      const pid_t pid = spawn(fx.batch_args(results), dir / "out", dir / "err");
      if (kills < 24) {
        // Uniform over start-up plus about three jobs: ~1.5 jobs of progress per kill.
        const double delay_s = double(rng.next_u64() % 1000000) / 1e6 * (t_start + 3 * t_job);
        std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
        ::kill(pid, SIGKILL);
      }
      const Exit e = wait_for(pid);
      const std::string err = slurp(dir / "err");
      if (has(err, "dropped a torn last line")) torn_noticed = true;
      if (e.signaled) {
        REQUIRE(e.code == SIGKILL);
        ++kills;
      } else {
        INFO(err);
        REQUIRE(e.code == 0);
        finished = true;
      }
      // Nothing finished is ever lost: complete lines only grow.
      const size_t lines = count_lines(results);
      CHECK(lines >= lines_before);
      lines_before = lines;
      if (e.signaled && lines > 0 && lines < ref.size()) ++killed_mid_run;
      if (kills >= 5 && !torn_injected && !finished) {
        // What a kill inside write() leaves: a prefix of a line without its '\n'.
        std::ofstream(results, std::ios::app | std::ios::binary) << "{\"id\":\"job-39\",\"output\":\"half";
        torn_injected = true;
      }
    }
    const auto got = outputs(results);  // also fails on a duplicated id
    CHECK(got.size() == ref.size());
    CHECK(got == ref);
  }
  CHECK(torn_noticed);
  CHECK(killed_mid_run >= 10);  // the kills were spread over the run, not all at start-up
}

TEST_CASE("batch: SIGTERM exits 143 and SIGINT 130 after a clean stop and the run resumes to the same results",
          "[cli][batch]") {
  const auto& fx = fixture();
  const auto& ref = reference();
  for (int sig : {SIGTERM, SIGINT}) {
    INFO("signal " << sig);
    const auto dir = strata::test::temp_dir("batch-term");
    const fs::path results = dir / "results.jsonl";
    const pid_t pid = spawn(fx.batch_args(results), dir / "out", dir / "err");
    // Wait for a first result so the signal lands mid-run, not during start-up.
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (count_lines(results) == 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(pid, sig);
    const Exit e = wait_for(pid);
    const std::string err = slurp(dir / "err");
    INFO(err);
    REQUIRE_FALSE(e.signaled);
    CHECK(e.code == 128 + sig);
    CHECK(has(err, "rerun the same command to resume"));
    const std::string text = slurp(results);
    REQUIRE(!text.empty());
    CHECK(text.back() == '\n');  // the last write was finished, never torn
    const size_t done = count_lines(results);
    CHECK(done < ref.size());
    auto again = run(fx.batch_args(results));
    INFO(again.err);
    CHECK(again.code == 0);
    CHECK_FALSE(has(again.err, "torn"));
    CHECK(has(again.err, std::to_string(done) + " already done"));
    CHECK(outputs(results) == ref);
  }
}

TEST_CASE("batch: --shard i/3 runs disjoint subsets and batch-merge checks exactly-once", "[cli][batch]") {
  const auto& fx = fixture();
  const auto& ref = reference();
  const auto dir = strata::test::temp_dir("batch-shard");
  std::vector<std::string> shard_files;
  size_t total = 0;
  for (int i = 0; i < 3; ++i) {
    const fs::path out = dir / fmt::format("s{}.jsonl", i);
    auto r = run(fx.batch_args(out, {"--shard", fmt::format("{}/3", i)}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(has(r.err, fmt::format("shard {}/3", i)));
    total += count_lines(out);
    CHECK(count_lines(out) < ref.size());
    shard_files.push_back(out.string());
  }
  CHECK(total == ref.size());
  const std::string merged = (dir / "all.jsonl").string();
  auto m = run({"batch-merge", "--jobs", fx.jobs.string(), "-o", merged, shard_files[0], shard_files[1], shard_files[2]});
  INFO(m.err);
  REQUIRE(m.code == 0);
  CHECK(outputs(merged) == ref);

  auto missing = run({"merge", "--jobs", fx.jobs.string(), "-o", (dir / "m2.jsonl").string(), shard_files[0], shard_files[2]});
  CHECK(missing.code == 1);
  CHECK(has(missing.err, "job id(s) missing"));
  CHECK_FALSE(fs::exists(dir / "m2.jsonl"));
  fs::copy_file(shard_files[1], dir / "copy.jsonl");
  auto dup = run({"batch-merge", "--jobs", fx.jobs.string(), "-o", (dir / "m3.jsonl").string(), shard_files[0],
                  shard_files[1], shard_files[2], (dir / "copy.jsonl").string()});
  CHECK(dup.code == 1);
  CHECK(has(dup.err, "duplicated"));
  auto bad = run(fx.batch_args(dir / "x.jsonl", {"--shard", "3/3"}));
  CHECK(bad.code == 2);
  CHECK(has(bad.err, "--shard '3/3': expected i/N"));
}

TEST_CASE("batch: a bad jobs file or flag gives one clear line and exit 2 and writes nothing", "[cli][batch]") {
  const auto& fx = fixture();
  const auto dir = strata::test::temp_dir("batch-bad");
  struct Case { std::string text, expect; };
  const Case cases[] = {
      {"{\"id\":\"a\",\"input\":\"x\"}\n{\"id\":\"b\",\"input\":\"y\",\"max_tokens\":-1}\n",
       "jobs.jsonl: line 2 (id 'b'): field 'max_tokens': -1 is out of range"},
      {"{\"id\":\"a\",\"input\":\"x\"}\n{\"id\":\"a\",\"input\":\"y\"}\n", "line 2: duplicate id 'a' (first on line 1)"},
      {"{\"id\":\"a\",\"input\":\"x\"\n", "jobs.jsonl: line 1: invalid JSON at byte"},
      {"{\"id\":\"a\",\"inptu\":\"x\"}\n", "unknown field 'inptu'"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    std::ofstream(dir / "jobs.jsonl", std::ios::trunc) << c.text;
    auto r = run({"batch", (dir / "jobs.jsonl").string(), "-o", (dir / "r.jsonl").string(), "-m", fx.model.string()});
    CHECK(r.code == 2);
    CHECK(has(r.err, c.expect));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "r.jsonl"));
  }
  auto nodir = run({"batch", dir.string(), "-o", (dir / "r.jsonl").string(), "-m", fx.model.string()});
  CHECK(nodir.code == 2);
  CHECK(has(nodir.err, "needs --instruction"));
  auto mode = run(fx.batch_args(dir / "r.jsonl", {"--long", "squash"}));
  CHECK(mode.code == 2);
  CHECK(has(mode.err, "unknown --long 'squash'"));
  auto top_p = run(fx.batch_args(dir / "r.jsonl", {"--top-p", "0"}));
  CHECK(top_p.code == 2);
  CHECK(has(top_p.err, "--top-p must be in (0, 1]"));
}

TEST_CASE("batch: a folder of documents with the results file inside it", "[cli][batch]") {
  const auto& fx = fixture();
  const auto dir = strata::test::temp_dir("batch-folder");
  std::ofstream(dir / "a.txt") << "first document";
  std::ofstream(dir / "b.txt") << "second document";
  const auto args = std::vector<std::string>{"batch", dir.string(), "-o", (dir / "r.jsonl").string(), "-m",
                                             fx.model.string(), "--instruction", "Summarise:", "-n", "4",
                                             "--no-progress"};
  auto first = run(args);
  INFO(first.err);
  REQUIRE(first.code == 0);
  const auto got = outputs(dir / "r.jsonl");
  CHECK(got.size() == 2);
  CHECK(got.count("a.txt") == 1);
  auto second = run(args);  // r.jsonl now sits in the folder: it is the output, not a document
  CHECK(second.code == 0);
  CHECK(has(second.err, "nothing to do"));
}


TEST_CASE("batch: inputs longer than the context: map-reduce or truncate or error", "[cli][batch]") {
  const auto& fx = fixture();
  const auto dir = strata::test::temp_dir("batch-long");
  std::string doc;
  for (int i = 0; i < 120; ++i) doc += "sentence " + std::to_string(i) + " tells the long story further. ";
  std::ofstream(dir / "long.txt") << doc;
  std::ofstream(dir / "jobs.jsonl") << "{\"id\":\"long\",\"input\":{\"file\":\"long.txt\"},\"max_tokens\":8}\n"
                                    << "{\"id\":\"short\",\"input\":\"brief\",\"max_tokens\":8}\n";
  auto args = [&](const std::string& out, const std::string& mode) {
    return std::vector<std::string>{"batch", (dir / "jobs.jsonl").string(), "-o", (dir / out).string(), "-m",
                                    fx.model.string(), "--temp", "0", "--no-progress", "-c", "128",
                                    "--instruction", "Summarise:", "--long", mode};
  };
  auto mr = run(args("mr.jsonl", "map-reduce"));
  INFO(mr.err);
  REQUIRE(mr.code == 0);
  std::istringstream lines(slurp(dir / "mr.jsonl"));
  std::string l1, l2;
  std::getline(lines, l1);
  std::getline(lines, l2);
  const json a = json::parse(l1), b = json::parse(l2);
  CHECK(a["long"]["mode"] == "map-reduce");
  CHECK(a["long"]["input_tokens"].get<int>() > 128);
  CHECK(a["long"]["chunks"].get<int>() >= 2);
  CHECK(a["long"]["passes"].get<int>() > a["long"]["chunks"].get<int>());
  CHECK(a["prompt_tokens"].get<int>() > a["long"]["input_tokens"].get<int>());  // every chunk was read
  CHECK(b["long"].is_null());

  auto tr = run(args("tr.jsonl", "truncate"));
  REQUIRE(tr.code == 0);
  const json t = json::parse(slurp(dir / "tr.jsonl").substr(0, slurp(dir / "tr.jsonl").find('\n')));
  CHECK(t["long"]["mode"] == "truncate");
  CHECK(t["prompt_tokens"].get<int>() + 8 <= 128);

  auto er = run(args("er.jsonl", "error"));
  CHECK(er.code == 1);
  CHECK(has(er.err, "job 'long': the input has"));
  CHECK(has(er.err, "use --long map-reduce or truncate"));
  CHECK(count_lines(dir / "er.jsonl") == 1);  // the short job still ran; the long one has no line
}

TEST_CASE("batch --batch 3: sessions decode together and the results equal --batch 1's", "[cli][batch]") {
  const auto& fx = fixture();
  const auto& ref = reference();
  const auto dir = strata::test::temp_dir("batch-three");
  const fs::path out = dir / "r.jsonl";
  auto r = run(fx.batch_args(out, {"--batch", "3"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(has(r.err, "3 sessions decoding together (--batch)"));
  CHECK(outputs(out) == ref);  // greedy and seeded sampled jobs alike
  const json first = json::parse(slurp(out).substr(0, slurp(out).find('\n')));
  CHECK(first["placement"]["sessions"] == 3);
  // More sessions than one batched step takes (16 rows): steps go in groups; same results.
  const fs::path out20 = dir / "r20.jsonl";
  auto r20 = run(fx.batch_args(out20, {"--batch", "20", "-c", "256"}));
  INFO(r20.err);
  REQUIRE(r20.code == 0);
  CHECK(has(r20.err, "20 sessions decoding together"));
  CHECK(outputs(out20) == ref);
  // The default on the CPU is one session (measured: batching pays little there, see README).
  const fs::path out1 = dir / "r1.jsonl";
  auto d = run(fx.batch_args(out1, {"--shard", "0/8", "--device", "cpu"}));
  INFO(d.err);
  REQUIRE(d.code == 0);
  CHECK(has(d.err, "1 session decoding together"));
  // Never more sessions than jobs.
  std::ofstream(dir / "two.jsonl") << "{\"id\":\"x\",\"input\":\"a b c\",\"max_tokens\":5}\n"
                                   << "{\"id\":\"y\",\"input\":\"d e f\",\"max_tokens\":9}\n";
  auto two = run({"batch", (dir / "two.jsonl").string(), "-o", (dir / "two-r.jsonl").string(), "-m",
                  fx.model.string(), "--temp", "0", "--no-progress", "--batch", "8"});
  INFO(two.err);
  REQUIRE(two.code == 0);
  CHECK(has(two.err, "2 sessions decoding together"));
  CHECK(count_lines(dir / "two-r.jsonl") == 2);
}

TEST_CASE("batch --batch 3: killed (SIGKILL, SIGTERM) and resumed ends identical to --batch 1", "[cli][batch]") {
  const auto& fx = fixture();
  const auto& ref = reference();
  const uint64_t seed = strata::test::fresh_seed();
  INFO("seed " << seed << " (STRATA_TEST_SEED reproduces the kill times)");
  strata::Rng rng(seed);
  const auto dir = strata::test::temp_dir("batch-three-crash");
  const fs::path results = dir / "results.jsonl";
  const double total = std::max(0.2, reference_seconds());
  size_t lines_before = 0, mid_run = 0;  // signals that found some but not all results written
  for (int signals = 0; signals < 8; ++signals) {
    const int sig = signals % 4 == 3 ? SIGTERM : SIGKILL;
    const pid_t pid = spawn(fx.batch_args(results, {"--batch", "3"}), dir / "out", dir / "err");
    const double delay_s = double(rng.next_u64() % 1000000) / 1e6 * total / 2;
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    ::kill(pid, sig);
    const Exit e = wait_for(pid);
    const std::string err = slurp(dir / "err");
    INFO("signal " << sig << ": " << err);
    // Killed, stopped cleanly by SIGTERM, or finished before the signal came.
    CHECK(((e.signaled && e.code == sig) || (!e.signaled && (e.code == 143 || e.code == 0))));
    if (!e.signaled && e.code == 143) CHECK(has(err, "rerun the same command to resume"));
    const size_t lines = count_lines(results);
    CHECK(lines >= lines_before);  // nothing finished is ever lost
    if (e.code != 0 && lines > 0 && lines < ref.size()) ++mid_run;
    lines_before = lines;
  }
  CHECK(mid_run >= 2);
  auto last = run(fx.batch_args(results, {"--batch", "3"}));
  INFO(last.err);
  REQUIRE(last.code == 0);
  CHECK(outputs(results) == ref);
}

TEST_CASE("batch --batch 2: long inputs (map-reduce, truncate) and failing jobs as with --batch 1", "[cli][batch]") {
  const auto& fx = fixture();
  const auto dir = strata::test::temp_dir("batch-long-two");
  std::string doc;
  for (int i = 0; i < 120; ++i) doc += "sentence " + std::to_string(i) + " tells the long story further. ";
  std::ofstream(dir / "long.txt") << doc;
  std::ofstream jobs(dir / "jobs.jsonl");
  jobs << "{\"id\":\"long\",\"input\":{\"file\":\"long.txt\"},\"max_tokens\":8}\n"
       << "{\"id\":\"gone\",\"input\":{\"file\":\"missing.txt\"},\"max_tokens\":8}\n";
  for (int i = 0; i < 5; ++i)
    jobs << json{{"id", fmt::format("s{}", i)}, {"input", fmt::format("brief note {}", i)}, {"max_tokens", 4 + 3 * i}}
                .dump()
         << "\n";
  jobs.close();
  for (const char* mode : {"map-reduce", "truncate"}) {
    INFO(mode);
    std::map<std::string, std::string> got[2];
    for (int b : {1, 2}) {
      const fs::path out = dir / fmt::format("{}-{}.jsonl", mode, b);
      auto r = run({"batch", (dir / "jobs.jsonl").string(), "-o", out.string(), "-m", fx.model.string(), "--temp",
                    "0", "--no-progress", "-c", "128", "--instruction", "Summarise:", "--long", mode, "--batch",
                    std::to_string(b)});
      INFO(r.err);
      CHECK(r.code == 1);  // the missing file
      CHECK(has(r.err, "missing.txt"));
      got[b - 1] = outputs(out);
    }
    CHECK(got[0].size() == 6);
    CHECK(got[0] == got[1]);
  }
}

// Every result line of a results file, by id.
std::map<std::string, json> result_lines(const fs::path& results) {
  std::map<std::string, json> m;
  std::istringstream in(slurp(results));
  for (std::string line; std::getline(in, line);) {
    json r = json::parse(line);
    m[r.at("id").get<std::string>()] = r;
  }
  return m;
}

TEST_CASE("batch --spec: greedy jobs give the plain text with the drafts' acceptance, and the default keeps sampled jobs plain",
          "[cli][batch]") {
  const auto& fx = fixture();
  const auto dir = strata::test::temp_dir("batch-spec");
  auto plain = run(fx.batch_args(dir / "plain.jsonl", {"--spec", "none"}));
  INFO(plain.err);
  REQUIRE(plain.code == 0);
  const auto want = result_lines(dir / "plain.jsonl");
  REQUIRE(want.size() == fx.ids.size());
  for (const auto& [id, r] : want) CHECK(r.at("acceptance").is_null());
  // Greedy jobs are every job but the sampled ones (temperature 1 in the job: every fifth).
  auto greedy = [&](const std::string& id) { return std::stoi(id.substr(4)) % 5 != 0; };
  for (const std::string mode : {"lookup", "early:d=1", "auto"}) {
    INFO("--spec " << mode);
    const auto out = dir / ("spec-" + std::to_string(std::hash<std::string>{}(mode)) + ".jsonl");
    auto r = run(fx.batch_args(out, {"--spec", mode}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(has(r.err, "1 session decoding together (--spec)"));
    const auto got = result_lines(out);
    REQUIRE(got.size() == want.size());
    uint64_t drafted = 0;
    for (const auto& [id, line] : got) {
      INFO(id);
      if (greedy(id)) CHECK(line.at("output") == want.at(id).at("output"));
      const json& acc = line.at("acceptance");
      REQUIRE(acc.is_object());
      CHECK(acc.at("accepted").get<uint64_t>() <= acc.at("drafted").get<uint64_t>());
      drafted += acc.at("drafted").get<uint64_t>();
    }
    if (mode != "auto") CHECK(drafted > 0);  // auto may decide that no draft pays on the CPU
  }
  // Without --spec the CPU engine's plan predicts no gain: every job decodes plainly, sampled ones
  // sampling the text of a plain run.
  auto def = run(fx.batch_args(dir / "default.jsonl"));
  INFO(def.err);
  REQUIRE(def.code == 0);
  CHECK(has(def.err, "spec: none (the default"));
  const auto got = result_lines(dir / "default.jsonl");
  for (const auto& [id, line] : got) {
    CHECK(line.at("output") == want.at(id).at("output"));
    CHECK(line.at("acceptance").is_null());
  }
  // Speculation decodes one job at a time: with --batch 2 it is a usage error.
  auto both = run(fx.batch_args(dir / "both.jsonl", {"--spec", "lookup", "--batch", "2"}));
  CHECK(both.code == 2);
  CHECK(has(both.err, "--batch 2"));
  CHECK_FALSE(fs::exists(dir / "both.jsonl"));
}

TEST_CASE("generate: SIGTERM stops between tokens and flushes the text so far and exits 143", "[cli]") {
  const auto& fx = fixture();
  const auto dir = strata::test::temp_dir("generate-term");
  const pid_t pid = spawn({"generate", "-m", fx.model.string(), "-p", "once upon a time", "-n", "-1", "-c", "1024",
                           "--ignore-eos", "--temp", "0", "-t", "1"},
                          dir / "out", dir / "err");
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (size_or_zero(dir / "out") < 8 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGTERM);
  const Exit e = wait_for(pid);
  const std::string err = slurp(dir / "err");
  INFO(err);
  REQUIRE_FALSE(e.signaled);
  CHECK(e.code == 143);
  CHECK(has(err, "stop: interrupted"));
  const std::string out = slurp(dir / "out");
  CHECK(out.size() >= 8);
  CHECK(out.back() == '\n');  // the partial text was flushed and the line ended
}
