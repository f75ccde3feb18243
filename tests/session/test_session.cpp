// session/: the run options are parsed (speculation included) before planning, and `strata plan
// --spec` runs the plan that a run with the same flags runs (session::plan_run, one function).
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "model/synth.h"
#include "offload/planner.h"
#include "session/run_plan.h"
#include "session/session.h"
#include "spec/spec_config.h"
#include "test_util.h"

namespace {

using strata::session::RunOptions;
using strata::session::Session;

// A header-only gemma3 with 27B shapes and a q3_k_m mix: what `strata synth --header-only` writes.
std::string header_only_27b() {
  static const std::string path = [] {
    const auto dir = strata::test::temp_dir("session-27b");
    strata::model::SynthOptions o;
    o.arch = strata::model::Arch::gemma3;
    o.preset = "27b";
    REQUIRE(strata::model::apply_preset(o).is_ok());
    o.mix = "q3_k_m";
    o.header_only = true;
    o.progress = false;
    const std::string p = (dir / "g27b.gguf").string();
    auto s = strata::model::write_synthetic_model(o, p);
    INFO((s ? std::string() : s.message()));
    REQUIRE(s);
    return p;
  }();
  return path;
}

std::string profile_path() { return std::string(STRATA_SOURCE_DIR) + "/configs/hw/rtx3060-12g.toml"; }

// What `generate -m M --profile P --vram V -c 4096 --spec S` plans, up to the device (no GPU here).
RunOptions run_options(const std::string& spec) {
  RunOptions o;
  o.model = header_only_27b();
  o.profile = profile_path();
  o.vram = "10GiB";
  o.n_ctx = 4096;
  o.spec = spec;
  return o;
}

strata::Result<strata::offload::ExecutorPlan> plan_of(const RunOptions& o) {
  auto s = Session::open_header(o);
  if (!s) return s.status();
  auto fo = (*s)->forward_options(0);
  if (!fo) return fo.status();
  return (*s)->plan_budget(*fo);
}

// A copy of profile_path() with a CPU at 60 GB/s (int8 and f32 activations alike) beside a PCIe
// link at 6 GB/s: there the planner computes blocks on the CPU (tests/offload/test_planner.cpp
// checks the rule that decides it).
std::string fast_cpu_profile() {
  static const std::string path = [] {
    auto p = strata::offload::load_profile(profile_path());
    REQUIRE(p);
    const auto ds = strata::offload::Provenance::datasheet("test: a fast CPU beside a slow PCIe link");
    p->name = "fast-cpu";
    p->h2d_pinned = {{1 << 20, 6, ds}, {64 << 20, 6, ds}};
    p->cpu_gemv.clear();
    p->cpu_gemv_q8.clear();
    using strata::GgmlType;
    for (GgmlType t : {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16,
                       GgmlType::F32}) {
      p->cpu_gemv.push_back({t, 60, ds});
      p->cpu_gemv_q8.insert(p->cpu_gemv_q8.end(), {{t, 8, 1, 60, ds}, {t, 8, 8, 30, ds}});
    }
    const std::string out = (strata::test::temp_dir("session-fast-cpu") / "fast-cpu.toml").string();
    REQUIRE(strata::offload::save_profile(*p, out));
    return out;
  }();
  return path;
}

// stderr_only: what the command writes to stderr instead of stdout.
std::string run_strata_stdout(const std::string& args, int& code, bool stderr_only = false) {
  const auto r = strata::test::run_strata(args);
  code = r.code;
  return stderr_only ? r.err : r.out;
}

// The placement report's lines, from "placement:" to the "bottleneck:" line.
std::string report_block(const std::string& s) {
  const size_t a = s.find("placement:");
  if (a == std::string::npos) return "";
  const size_t b = s.find("bottleneck:", a);
  if (b == std::string::npos) return "";
  return s.substr(a, s.find('\n', b) + 1 - a);
}

}  // namespace

TEST_CASE("session: --spec is parsed when the model opens and reaches the plan's run shape", "[session]") {
  const uint32_t n_layer = 62;  // gemma3-27B
  {
    auto e = plan_of(run_options("early:d=8"));
    INFO((e ? std::string() : e.message()));
    REQUIRE(e);
    CHECK(e->shape.draft_depth == 8);
    CHECK(e->shape.draft_len == 8);  // --draft-max's default
    CHECK(e->shape.speculative());
    CHECK(e->plan.prediction.spec_tps > 0);
  }
  {
    auto o = run_options("early:d=4");
    o.draft_max = 3;
    auto e = plan_of(o);
    REQUIRE(e);
    CHECK(e->shape.draft_depth == 4);
    CHECK(e->shape.draft_len == 3);
  }
  {
    // auto's early-exit drafter drafts with a fixed depth: default_depth unless auto:d=N.
    auto e = plan_of(run_options("auto"));
    REQUIRE(e);
    CHECK(e->shape.draft_depth == strata::spec::default_depth(n_layer));
    auto e2 = plan_of(run_options("auto:d=10"));
    REQUIRE(e2);
    CHECK(e2->shape.draft_depth == 10);
  }
  {
    // bench spec --plan-spec: the run requires the draft path resident, and the plan keeps it so.
    auto o = run_options("early:d=16");
    o.require_draft_resident = true;
    auto e = plan_of(o);
    INFO((e ? std::string() : e.message()));
    REQUIRE(e);
    CHECK(e->shape.require_draft_resident);
    CHECK(e->plan.draft_resident);
    auto plain = plan_of(run_options("early:d=16"));
    REQUIRE(plain);
    CHECK_FALSE(plain->shape.require_draft_resident);
  }
  for (const char* plain : {"none", "lookup", "subset"}) {
    INFO(plain);
    auto e = plan_of(run_options(plain));
    REQUIRE(e);
    CHECK(e->shape.draft_depth == 0);  // no prefix drafter: planned as plain decoding
    CHECK_FALSE(e->shape.speculative());
  }
  // A bad --spec fails when the model opens, as a usage error, before anything is planned.
  bool bad = false;
  auto s = Session::open_header(run_options("early:d=99"), &bad);
  REQUIRE_FALSE(s);
  CHECK(bad);
  CHECK_THAT(s.message(), Catch::Contains("--spec early: depth d=99 must be in [1, 62)"));
  bad = false;
  auto m = Session::open_header([] { auto o = run_options("none"); o.model = "/nonexistent.gguf"; return o; }(), &bad);
  REQUIRE_FALSE(m);
  CHECK_FALSE(bad);
  // A header-only model plans but never runs.
  auto h = Session::open_header(run_options("none"));
  REQUIRE(h);
  auto st = (*h)->open_engine(0);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.message(), Catch::Contains("header only"));
}

TEST_CASE("session: strata plan --spec gives the placement a run with the same flags plans", "[session]") {
  for (const char* spec : {"early:d=8", "early:d=20", "auto", "lookup"}) {
    INFO(spec);
    // Both default to --cpu-blocks auto; generate keeps host KV off (--kv-host none) where strata
    // plan allows it, so the run side asks for it to plan on the same terms.
    auto o = run_options(spec);
    o.kv_host = "auto";
    auto e = plan_of(o);
    INFO((e ? std::string() : e.message()));
    REQUIRE(e);
    auto run_json = strata::offload::plan_json(e->blocks, e->profile, e->budgets, e->shape, e->plan);
    int code = -1;
    const std::string out = run_strata_stdout("plan -m " + o.model + " --profile " + profile_path() +
                                                  " --vram 10GiB --ctx 4096 --json --spec " + spec,
                                              code);
    REQUIRE(code == 0);
    auto plan_json = nlohmann::json::parse(out);
    plan_json.erase("feasible");
    plan_json.erase("planning_ms");
    CHECK(plan_json == run_json);
    CHECK(plan_json["run"]["draft_depth"] == e->shape.draft_depth);
  }
  // The text report states the speculative prediction and the acceptance it assumes.
  int code = -1;
  const std::string text = run_strata_stdout("plan -m " + header_only_27b() + " --profile " + profile_path() +
                                                 " --vram 10GiB --ctx 4096 --spec early:d=8 --draft-max 6",
                                             code);
  REQUIRE(code == 0);
  CHECK_THAT(text, Catch::Contains("tok/s speculative (draft depth 8, k 6, assumed acceptance 0.60; draft path"));
  // --spec and the old flags do not mix; a bad --spec is one line and exit 2.
  run_strata_stdout("plan -m " + header_only_27b() + " --profile " + profile_path() + " --spec lookup --no-spec", code);
  CHECK(code == 2);
  run_strata_stdout("plan -m " + header_only_27b() + " --profile " + profile_path() + " --spec medusa", code);
  CHECK(code == 2);
}

TEST_CASE("session: generate --spec reports the plan that strata plan --spec makes for the same run", "[session]") {
  // Without --vram, generate's report is the planner's view of this run on the profile's machine;
  // with --spec it carries the draft depth and length, as strata plan --spec does.
  const std::string model = strata::test::testdata("models/gemma3-swa/model.gguf");  // 6 layers
  for (const char* spec : {"early:d=2", "auto:d=3", "lookup"}) {
    INFO(spec);
    int code = -1;
    const std::string err =
        run_strata_stdout("generate -m " + model + " -p 'the quick brown fox' -n 8 --temp 0 -c 512 --device cpu "
                          "--draft-max 5 --profile " + profile_path() + " --spec " + spec,
                          code, true);
    REQUIRE(code == 0);
    const std::string block = report_block(err);
    REQUIRE_FALSE(block.empty());
    const size_t at = block.find("-token prompt");
    REQUIRE(at != std::string::npos);
    const size_t from = block.rfind(' ', at) + 1;
    const std::string n_prompt = block.substr(from, at - from);
    const std::string out = run_strata_stdout("plan -m " + model + " --profile " + profile_path() +
                                                  " --ctx 512 --gen 8 --kv f32 --draft-max 5 --prompt " + n_prompt +
                                                  " --spec " + spec,
                                              code);
    REQUIRE(code == 0);
    CHECK(report_block(out) == block);
    CHECK((block.find("tok/s speculative (draft depth") != std::string::npos) == (std::string(spec) != "lookup"));
  }
}

TEST_CASE("session: -b auto keeps 512-token chunks under a VRAM budget and on the CPU engine, and -b N wins", "[session]") {
  auto chunk = [](RunOptions o) -> uint32_t {
    auto s = Session::open_header(o);
    REQUIRE(s);
    auto fo = (*s)->forward_options(0);
    REQUIRE(fo);
    return fo->ubatch;
  };
  RunOptions o = run_options("none");
  REQUIRE(o.ubatch == strata::session::kUbatchAuto);  // the default is auto
  CHECK(chunk(o) == strata::session::kDefaultUbatch);  // --vram: 512
  o.vram.clear();
  o.device = "cpu";
  CHECK(chunk(o) == strata::session::kDefaultUbatch);
  o.ubatch = 1536;
  CHECK(chunk(o) == 1536);
  o.n_ctx = 1024;
  CHECK(chunk(o) == 1024);  // never more than the context
  // On the GPU (none here, or one in a GPU run) auto picks 512 .. 4096, within the context.
  o.ubatch = strata::session::kUbatchAuto;
  o.device = "auto";
  o.n_ctx = 2048;
  const uint32_t gpu = chunk(o);
  CHECK(gpu >= strata::session::kDefaultUbatch);
  CHECK(gpu <= 2048);
}

TEST_CASE("session: plan_plain is the run planned without a draft path, never predicted slower", "[session]") {
  RunOptions o = run_options("early:d=16");
  o.require_draft_resident = true;  // as bench spec --plan-spec plans
  o.vram = "12GiB";
  auto s = Session::open_header(o);
  REQUIRE(s);
  auto fo = (*s)->forward_options(0);
  REQUIRE(fo);
  auto spec_plan = (*s)->plan_budget(*fo);
  REQUIRE(spec_plan);
  REQUIRE(spec_plan->shape.speculative());
  CHECK(spec_plan->plan.draft_resident);
  auto plain = (*s)->plan_plain(*fo);
  INFO((plain ? std::string() : plain.message()));
  REQUIRE(plain);
  CHECK_FALSE(plain->shape.speculative());
  CHECK_FALSE(plain->shape.require_draft_resident);
  CHECK(plain->budgets.vram == spec_plan->budgets.vram);
  // Free of the draft-path constraint, plain decoding is never predicted slower than the
  // speculative plan's plain rate (the planner maximises it over a superset).
  CHECK(plain->plan.prediction.decode_tps >= spec_plan->plan.prediction.decode_tps * (1 - 1e-9));
  // Same run otherwise: context, KV and the cpu-tier mode.
  CHECK(plain->shape.ctx == spec_plan->shape.ctx);
  CHECK(plain->shape.kv == spec_plan->shape.kv);
}

TEST_CASE("session: --cpu-blocks auto|on|off reaches the plan, and strata plan decides alike", "[session]") {
  RunOptions o = run_options("none");
  REQUIRE(o.cpu_blocks == "auto");  // the default (run_options.h says why)
  o.cpu_blocks = "auto";
  o.profile = fast_cpu_profile();
  auto cpu_blocks = [](const strata::offload::ExecutorPlan& e) { return e.plan.placement.any(strata::offload::Tier::cpu); };
  auto au = plan_of(o);
  INFO((au ? std::string() : au.message()));
  REQUIRE(au);
  CHECK(cpu_blocks(*au));
  CHECK_THAT(au->plan.cpu_tier_choice, Catch::Contains("computed on the CPU (auto: predicted"));
  CHECK(au->shape.cpu_int8);  // --cpu-matmul auto under --vram: the CUDA engine's int8 cpu-tier blocks
  o.cpu_blocks = "off";
  auto off = plan_of(o);
  REQUIRE(off);
  CHECK_FALSE(cpu_blocks(*off));
  CHECK(off->plan.cpu_tier_choice.empty());
  CHECK(off->plan.prediction.objective_tps() * (1 + strata::offload::kCpuTierMinGain) <=
        au->plan.prediction.objective_tps());
  o.cpu_blocks = "on";
  auto on = plan_of(o);
  REQUIRE(on);
  CHECK(on->plan.placement.ffn == au->plan.placement.ffn);
  CHECK(on->plan.placement.attention == au->plan.placement.attention);
  CHECK_THAT(on->plan.cpu_tier_choice, Catch::Contains("(--cpu-blocks on)"));
  // strata plan takes the same flag and makes the same decision (the same plan_run).
  for (const char* mode : {"", " --cpu-blocks auto", " --cpu-blocks off", " --cpu-blocks", " --no-cpu-blocks"}) {
    INFO("plan" << mode);
    RunOptions ro = run_options("none");
    ro.profile = fast_cpu_profile();
    const std::string m = mode;
    ro.cpu_blocks = m.empty() || m == " --cpu-blocks auto" ? "auto" : m == " --cpu-blocks" ? "on" : "off";
    auto e = plan_of(ro);
    REQUIRE(e);
    int code = -1;
    const std::string out = run_strata_stdout("plan -m " + ro.model + " --profile " + ro.profile +
                                                  " --vram 10GiB --ctx 4096 --no-kv-host --json --spec none" + mode,
                                              code);
    REQUIRE(code == 0);
    auto doc = nlohmann::json::parse(out);
    doc.erase("feasible");
    doc.erase("planning_ms");
    CHECK(doc == strata::offload::plan_json(e->blocks, e->profile, e->budgets, e->shape, e->plan));
  }
}

TEST_CASE("session: --cpu-blocks needs a budget only when asked for, and a bad name is an error", "[session]") {
  auto fo_error = [](RunOptions o) {
    auto s = Session::open_header(o);
    REQUIRE(s);
    auto fo = (*s)->forward_options(0);
    return fo ? std::string() : fo.message();
  };
  RunOptions o = run_options("none");
  o.vram.clear();
  o.device = "cpu";
  CHECK(fo_error(o).empty());  // auto, the default: no budget, no cpu tier, no error
  o.cpu_blocks = "off";
  CHECK(fo_error(o).empty());
  o.cpu_blocks = "on";
  CHECK_THAT(fo_error(o), Catch::Contains("give --vram too"));
  o.cpu_blocks = "bogus";
  CHECK_THAT(fo_error(o), Catch::Contains("--cpu-blocks: 'bogus' is not auto, on or off"));
  o = run_options("none");
  o.cpu_blocks = "sometimes";
  auto e = plan_of(o);
  REQUIRE_FALSE(e);
  CHECK_THAT(e.message(), Catch::Contains("--cpu-blocks: 'sometimes' is not auto, on or off"));
}

TEST_CASE("session: --cpu-matmul auto is int8 on both engines, exact only when asked", "[session]") {
  auto int8 = [](RunOptions o) {
    auto s = Session::open_header(o);
    REQUIRE(s);
    auto fo = (*s)->forward_options(0);
    INFO((fo ? std::string() : fo.message()));
    REQUIRE(fo);
    return fo->cpu_int8;
  };
  RunOptions o = run_options("none");
  REQUIRE(o.cpu_matmul == "auto");  // the default
  CHECK(int8(o));                   // --vram: the CUDA engine
  auto in = [&] {
    auto s = Session::open_header(o);
    REQUIRE(s);
    auto fo = (*s)->forward_options(0);
    REQUIRE(fo);
    auto i = strata::session::budget_inputs(o, *fo);
    REQUIRE(i);
    return *i;
  };
  CHECK(in().shape.cpu_int8);  // and the planner prices cpu-tier blocks at the int8 rates
  CHECK(in().cpu_blocks == strata::offload::CpuBlocks::automatic);  // the default (run_options.h says why)
  o.cpu_matmul = "exact";
  CHECK_FALSE(int8(o));
  CHECK_FALSE(in().shape.cpu_int8);
  o.vram.clear();
  o.device = "cpu";
  o.cpu_matmul = "auto";
  CHECK(int8(o));  // the CPU engine decodes with int8 activations too
  o.cpu_matmul = "exact";
  CHECK_FALSE(int8(o));  // the reference, when asked
  o.cpu_matmul = "int8";
  CHECK(int8(o));
  o.device = "cuda";
  o.cpu_matmul = "auto";
  CHECK(int8(o));
  CHECK(strata::session::resolve_cpu_int8("auto").value());
  CHECK_FALSE(strata::session::resolve_cpu_int8("exact").value());
  CHECK(strata::session::resolve_cpu_int8("int8").value());
  CHECK_THAT(strata::session::resolve_cpu_int8("fast").message(),
             Catch::Contains("--cpu-matmul: 'fast' is not auto, exact or int8"));
}
