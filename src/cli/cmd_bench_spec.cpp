// strata bench spec: plain decoding against each --spec mode in the same run, on one prompt
// (default: a summarisation prompt, where prompt lookup pays). Reports per mode tok/s, speedup
// over plain, acceptance per drafter, tokens per verify pass, draft-step and verify costs, and
// whether the text equals plain decoding's (greedy: it must). JSON with --json.
// --prompts DIR: the same for every prompt file in DIR, then one table of acceptance per draft
// depth (spec/depth_stats.h) per prompt, mode and drafter.
// --replay A,...: speed against a simulated acceptance (spec/replay.h): the plain run's text is
// replayed as drafts, each token right with probability A; everything else is real.
// --replay-tree B: each acceptance also as token trees (speculative_decoder.h) on the same outcomes.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/bench_compare.h"
#include "cli/bench_kernels.h"
#include "cli/model_args.h"
#include "core/log.h"
#include "core/text_file.h"
#include "runtime/sampler.h"
#include "session/decode.h"
#include "session/session.h"
#include "spec/early_exit.h"
#include "spec/replay.h"
#include "spec/speculative_decoder.h"

namespace strata::cli {
namespace {

constexpr const char* kDefaultPrompt =
    "The Linux kernel keeps a list of all processes in a circular doubly linked list of task structures. Each task "
    "structure holds the state of one process: its identifier, its parent, its open files, its memory map and its "
    "scheduling information. The scheduler walks the run queue, not the whole list, to choose the next task to run; "
    "the run queue holds only the tasks that are ready. When a process exits, its task structure stays in the list "
    "until its parent reads the exit status, so that the parent can learn how the child ended.\n\nSummary:";

struct BenchSpecArgs {
  ModelArgs m;
  std::string prompt = kDefaultPrompt, file;
  std::string prompts_dir;  // --prompts: every *.txt prompt in it, one after another
  uint32_t n_gen = 128;
  std::string modes = "none,lookup,early,subset,auto";
  int reps = 2;
  std::vector<double> replay;  // simulated acceptances (empty: no replay runs)
  std::string replay_cost = "none";
  std::string plan_spec;  // --plan-spec: the --spec mode the placement is planned for (empty: none)
  uint32_t replay_tree = 0;  // > 0: each replay acceptance also runs with token trees of this branching
  std::string replay_policy = "fixed";  // chains: fixed (draft-max every round) or auto (auto's rule)
  std::string json_out;
  BenchCompare compare;
};

// --modes: comma-separated --spec values; an item that names no mode (key=value, no ':') continues
// the one before it, so "none,early:d=8,tree=2" is two modes ("early:d=8,tree=2").
std::vector<std::string> split_modes(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    if (!out.empty() && item.find('=') != item.npos && item.find(':') == item.npos) out.back() += "," + item;
    else out.push_back(item);
  }
  return out;
}

// One prompt of the run: a name (the file's stem with --prompts) and its tokens.
struct PromptCase {
  std::string name;
  std::vector<int32_t> tokens;
};

// --prompts DIR: every *.txt file in it, sorted by name, each read byte for byte as the prompt (a
// continuation must end where its text ends, an extraction may end with a newline).
Result<std::vector<std::pair<std::string, std::string>>> read_prompt_dir(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  if (ec) return Status::error("--prompts {}: {}", dir, ec.message());
  if (files.empty()) return Status::error("--prompts {}: no .txt prompt files", dir);
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : files) {
    auto text = read_text_file(f.string(), "prompt file");
    if (!text) return text.status();
    out.emplace_back(f.stem().string(), std::move(*text));
  }
  return out;
}

// With several prompts: one markdown row per prompt, mode and drafter that drafted, for a table
// like models/README.md's.
void print_depth_table(const nlohmann::json& prompts, uint32_t draft_max) {
  std::string head = "| prompt | mode | drafter | tok/s | x plain | verify passes | tokens/verify | mean accepted |";
  std::string rule = "| --- | --- | --- | --- | --- | --- | --- | --- |";
  for (uint32_t i = 1; i <= draft_max; ++i) head += fmt::format(" d{} |", i), rule += " --- |";
  fmt::print("\nacceptance by depth: P(draft i accepted | drafts before it accepted), passes reaching it in ()\n"
             "{} same text |\n{} --- |\n", head, rule);
  for (const auto& p : prompts)
    for (const auto& r : p["runs"]) {
      const std::string same = r["same_text_as_plain"].get<bool>() ? "yes" : "NO";
      const auto row = [&](const std::string& drafter, const std::string& passes, const std::string& tpv,
                           const std::string& mean) {
        return fmt::format("| {} | {} | {} | {:.1f} | {:.2f} | {} | {} | {} |", p["name"].get<std::string>(),
                           r["spec"].get<std::string>(), drafter, r["tok_per_s"].get<double>(),
                           r["speedup_vs_plain"].get<double>(), passes, tpv, mean);
      };
      if (r["drafters"].empty()) {
        std::string line = row("-", "-", "-", "-");
        for (uint32_t i = 1; i <= draft_max; ++i) line += " - |";
        fmt::print("{} {} |\n", line, same);
      }
      for (const auto& d : r["drafters"]) {
        if (d["rounds"].get<uint64_t>() == 0) continue;
        std::string line = row(d["name"].get<std::string>(), fmt::format("{}", d["rounds"].get<uint64_t>()),
                               fmt::format("{:.2f}", d["tokens_per_verify"].get<double>()),
                               fmt::format("{:.2f}", d["mean_accepted"].get<double>()));
        const auto& by = d["acceptance_by_depth"];
        for (uint32_t i = 1; i <= draft_max; ++i)
          line += i <= by.size() ? fmt::format(" {:.2f} ({}) |", by[i - 1]["rate"].get<double>(),
                                               by[i - 1]["reached"].get<uint64_t>())
                                 : std::string(" - |");
        fmt::print("{} {} |\n", line, same);
      }
    }
}

int run(BenchSpecArgs a) {
  const auto limit = a.m.thread_limit();
  if (Status s = a.compare.load("spec"); !s) {
    log::error("{}", s.message());
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> texts;
  if (!a.prompts_dir.empty()) {
    auto t = read_prompt_dir(a.prompts_dir);
    if (!t) {
      log::error("{}", t.message());
      return 1;
    }
    texts = std::move(*t);
  } else if (!a.file.empty()) {
    auto text = read_text_file(a.file, "prompt file");
    if (!text) {
      log::error("{}", text.message());
      return 1;
    }
    texts.emplace_back(std::filesystem::path(a.file).stem().string(), std::move(*text));
  } else {
    texts.emplace_back("prompt", a.prompt);
  }
  // The run plans without speculation (--spec stays none): it compares every mode on one engine;
  // except that replay rounds paying an early-exit drafter's passes plan for that drafter (the
  // draft path kept resident, as `generate --spec early:d=N` plans), and --plan-spec names the mode
  // to plan for; the plain row then runs on that plan too.
  if (!a.replay.empty() && a.replay_cost != "none") {
    a.m.spec = a.replay_cost;
    a.m.require_draft_resident = true;  // what the rounds pay for is the drafter on its own plan
  }
  if (!a.plan_spec.empty()) {
    a.m.spec = a.plan_spec;
    a.m.require_draft_resident = true;
  }
  OpenModel om;
  if (int rc = om.open(a.m, true)) return rc;
  auto& ses = *om.session;
  std::vector<PromptCase> cases;
  size_t longest = 0;
  for (auto& [name, text] : texts) {
    cases.push_back({name, om.tok->encode(text, true, false)});
    longest = std::max(longest, cases.back().tokens.size());
  }
  if (int rc = om.open_engine(uint32_t(longest) + a.n_gen + 1)) return rc;
  auto& f = ses.engine();
  ses.report_plan();
  // A plan for speculation keeps the draft path resident and so streams more: its own plain row is
  // slower than plain decoding planned for itself. The xN below are against this plan's plain row;
  // the plain plan's prediction is printed (and in the JSON) for the honest comparison.
  std::optional<double> plain_plan_tps;
  if (const auto& ep = ses.executor_plan(); ep && ep->shape.speculative()) {
    auto fo = ses.forward_options(uint32_t(longest) + a.n_gen + 1);
    auto pp = fo ? ses.plan_plain(*fo) : Result<offload::ExecutorPlan>(fo.status());
    if (pp) {
      plain_plan_tps = pp->plan.prediction.decode_tps;
      log::info("plain decoding planned for itself: predicted {:.2f} tok/s (this plan's plain row: {:.2f} predicted); "
                "the speedups below are against this plan's plain row",
                *plain_plan_tps, ep->plan.prediction.decode_tps);
    } else {
      log::warn("the plain plan for comparison: {}", pp.message());
    }
  }
  std::vector<spec::SpecConfig> modes;
  for (const auto& m : split_modes(a.modes)) {
    auto c = spec::parse_spec(m, a.m.draft_max, f.model().spec.hp.n_layer);
    if (!c) {
      log::error("{}", c.message());
      return 2;
    }
    c->window = ses.spec().window;  // --draft-window (parsed by the session)
    modes.push_back(*c);
  }
  if (modes.empty() || modes.front().mode != spec::SpecMode::none)
    modes.insert(modes.begin(), spec::SpecConfig{});  // the baseline runs first
  std::unique_ptr<spec::SpecConfig> cost;
  if (!a.replay.empty() && a.replay_cost != "none") {
    auto c = spec::parse_spec(a.replay_cost, a.m.draft_max, f.model().spec.hp.n_layer);
    if (!c || c->mode != spec::SpecMode::early) {
      log::error("--replay-cost: expected none or early:d=N (got '{}'){}", a.replay_cost, c ? "" : ": " + c.message());
      return 2;
    }
    cost = std::make_unique<spec::SpecConfig>(*c);
  }

  runtime::SamplerParams sp;
  sp.temperature = 0;
  using Decoder = Result<std::unique_ptr<spec::SpeculativeDecoder>>;
  nlohmann::json all = nlohmann::json::array();
  bool all_same = true;
  for (const auto& pc : cases) {
    const auto& prompt = pc.tokens;
    auto configs = modes;
    log::info("{} | {} | prompt {}: {} tokens | {} tokens per run, greedy, best of {}", f.model().spec.summary(),
              f.device_name(), pc.name, prompt.size(), a.n_gen, a.reps);
    if (cases.size() > 1) fmt::print("== prompt {} ({} tokens)\n", pc.name, prompt.size());
    // Repetitions go round-robin over the modes, so a change in machine load during the run
    // (shared machines) hits every mode alike; the fastest repetition of each counts.
    std::vector<spec::SpecStats> best(configs.size());
    std::vector<std::vector<int32_t>> text(configs.size());
    // Repetition r of row i with the decoder `make` builds: exactly n_gen tokens, end of text or
    // not (every row must produce the same text); the fastest repetition's statistics are kept.
    // Returns the exit status (0: it ran).
    auto run_row = [&](size_t i, int r, const std::function<Decoder(runtime::Sampler&)>& make) -> int {
      runtime::Sampler sampler(sp, f.model().spec.hp.n_vocab);
      for (int32_t t : prompt) sampler.accept(t);
      auto dec = make(sampler);
      if (!dec) {
        log::error("{}", dec.message());
        return 2;
      }
      auto& out = text[i];
      out.clear();
      auto run = session::decode(f, **dec, prompt, nullptr, {int32_t(a.n_gen), true},
                                 [&](int32_t t) { out.push_back(t); });
      if (!run) {
        log::error("{}", run.message());
        return 1;
      }
      if (r == 0 || (*dec)->stats().tokens_per_s() > best[i].tokens_per_s()) best[i] = (*dec)->stats();
      return 0;
    };
    for (int r = 0; r < a.reps; ++r) {
      for (size_t i = 0; i < configs.size(); ++i)
        if (int rc = run_row(i, r, [&](runtime::Sampler& s) { return session::make_decoder(f, s, configs[i]); }))
          return rc;
    }
    // Replay runs: the plain run's text as drafts, each token right with probability A.
    std::vector<int32_t> reference(prompt.begin(), prompt.end());
    reference.insert(reference.end(), text[0].begin(), text[0].end());
    const size_t n_modes = configs.size();
    if (a.replay_tree && !f.supports_trees())
      log::info("--replay-tree: this {} engine has no token trees (CUDA: f16/q8/q4 KV, no host compute); its tree rows "
                "verify chains", f.device_name());
    // Per acceptance a chain row, and with --replay-tree a token-tree row on the same outcomes.
    std::vector<std::pair<double, uint32_t>> replay_rows;
    for (const double acc : a.replay) {
      replay_rows.emplace_back(acc, 0);
      if (a.replay_tree) replay_rows.emplace_back(acc, a.replay_tree);
    }
    for (const auto& [acc, tree] : replay_rows) {
      spec::SpecConfig shown;
      shown.mode = spec::SpecMode::replay;
      shown.tree = tree;
      configs.push_back(shown);
      best.emplace_back();
      text.emplace_back();
      const size_t row = configs.size() - 1;
      for (int r = 0; r < a.reps; ++r) {
        auto make = [&](runtime::Sampler& s) -> Decoder {
          std::unique_ptr<spec::Drafter> inner;
          if (cost) inner = std::make_unique<spec::EarlyExit>(f, cost->depth, 0.0f);  // always k drafts: their cost
          auto drafter = std::make_unique<spec::ReplayDrafter>(reference, acc, 0x5eedull, f.model().spec.hp.n_vocab,
                                                               std::move(inner));
          return spec::SpeculativeDecoder::create_with(f, s, a.m.draft_max, std::move(drafter), tree, true,
                                                       a.replay_policy == "auto");
        };
        if (int rc = run_row(row, r, make)) return rc;
      }
    }
    if (!a.replay.empty())
      fmt::print("replay rows: simulated drafter (the plain text replayed, each token right with probability a{}); "
                 "verification, rollback and all costs measured\n",
                 cost ? fmt::format(", the {} drafter run for its cost", cost->text()) : ", drafting free");

    nlohmann::json runs = nlohmann::json::array();
    const double base_tps = best[0].tokens_per_s();
    for (size_t i = 0; i < configs.size(); ++i) {
      const bool same = text[i] == text[0];
      all_same = all_same && same;
      const double speedup = base_tps > 0 ? best[i].tokens_per_s() / base_tps : 0.0;
      auto j = best[i].to_json();
      j["speedup_vs_plain"] = speedup;
      j["same_text_as_plain"] = same;
      const std::string label = i < n_modes ? configs[i].text()
                                : configs[i].tree ? fmt::format("replay a={:g} tree={}", replay_rows[i - n_modes].first, configs[i].tree)
                                                  : fmt::format("replay a={:g}{}", replay_rows[i - n_modes].first,
                                                                a.replay_policy == "auto" ? " auto" : "");
      if (i >= n_modes) {
        j["replay_acceptance"] = replay_rows[i - n_modes].first;
        j["replay_tree"] = configs[i].tree;
        if (!configs[i].tree) j["replay_policy"] = a.replay_policy;
        j["simulated_drafter"] = true;
      }
      runs.push_back(j);
      fmt::print("{:<12} {:8.2f} tok/s  x{:.2f}  {}\n", label, best[i].tokens_per_s(), speedup,
                 same ? "same text" : "TEXT DIFFERS FROM PLAIN");
      if (configs[i].mode != spec::SpecMode::none) fmt::print("  {}\n", best[i].summary());
    }
    all.push_back({{"name", pc.name}, {"n_prompt", prompt.size()}, {"runs", runs}});
  }
  nlohmann::json j = {{"bench", "spec"}, {"model", a.m.model}, {"device", std::string(f.device_name())},
                      {"n_gen", a.n_gen}, {"draft_max", a.m.draft_max}, {"draft_window", ses.spec().window.text()},
                      {"reps", a.reps}};
  if (plain_plan_tps) j["plain_plan_predicted_tps"] = *plain_plan_tps;
  if (const auto& ep = ses.executor_plan()) j["plan_predicted_tps"] = ep->plan.prediction.decode_tps;
  if (a.prompts_dir.empty()) {
    j["n_prompt"] = all[0]["n_prompt"];
    j["runs"] = all[0]["runs"];
  } else {
    j["prompts_dir"] = a.prompts_dir;
    j["prompts"] = all;
    print_depth_table(all, a.m.draft_max);
  }
  if (int rc = finish_bench(j, a.json_out, a.compare); rc != 0) return rc;
  return all_same ? 0 : 1;  // greedy speculation must not change the text
}

}  // namespace

std::function<int()> add_bench_spec(CLI::App* bench) {
  auto a = std::make_shared<BenchSpecArgs>();
  auto* sub = bench->add_subcommand("spec", "Plain decoding vs self-speculative modes in the same run (greedy): tok/s, "
                                            "acceptance, tokens per verify pass, draft and verify costs");
  a->m.add_to(sub);
  sub->add_option("-p,--prompt", a->prompt, "Prompt text (default: a paragraph followed by \"Summary:\")");
  sub->add_option("-f,--file", a->file, "Read the prompt from a file");
  sub->add_option("--prompts", a->prompts_dir,
                  "Run every *.txt prompt in this directory (e.g. models/prompts) and print a table of acceptance "
                  "by draft depth; JSON gets one entry per prompt")
      ->excludes(sub->get_option("--file"))
      ->excludes(sub->get_option("--prompt"));
  sub->add_option("-n,--n-gen", a->n_gen, "Tokens generated per run")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  sub->add_option("--modes", a->modes, "--spec modes, comma-separated (plain decoding always runs first)")
      ->capture_default_str();
  sub->add_option("--draft-max", a->m.draft_max, "Most tokens drafted per verify pass (1..15)")->capture_default_str();
  add_draft_window_option(sub, a->m.draft_window);
  sub->add_option("-r,--reps", a->reps, "Runs per mode (the fastest counts)")->capture_default_str()->check(CLI::Range(1, 100));
  sub->add_option("--replay", a->replay,
                  "Simulated acceptances, comma-separated (e.g. 0.3,0.5,0.7,0.9): drafts replay the plain run's text, "
                  "each token right with probability A; verification and all costs are real")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--replay-cost", a->replay_cost,
                  "Drafter whose forward passes replay rounds pay for (none: free drafts, as prompt lookup; early:d=N)")
      ->capture_default_str();
  sub->add_option("--replay-tree", a->replay_tree,
                  "With --replay: also run each acceptance with token trees of up to B children per node (greedy, "
                  "CPU or CUDA engine; the rank-r candidate right with probability A when ranks before it were wrong)")
      ->check(CLI::Range(0, 8));
  sub->add_option("--replay-policy", a->replay_policy,
                  "With --replay, the chains' draft length: fixed (--draft-max every round: speed at that length) or "
                  "auto (chosen each round as --spec auto chooses it, from the measured acceptance and costs, plain "
                  "steps where drafting does not pay: whether auto backs off at low acceptance)")
      ->check(CLI::IsMember({"fixed", "auto"}))
      ->capture_default_str();
  sub->add_option("--plan-spec", a->plan_spec,
                  "Plan the placement for this --spec mode with its draft path resident (early:d=16: the head and "
                  "layers [0,16) in VRAM, even where the planner predicts that slower); default: planned for plain "
                  "decoding")
      ->excludes(sub->get_option("--replay-cost"));
  sub->add_option("--json", a->json_out, "Write the results as JSON to this file");
  a->compare.add_to(sub);
  return [a, sub]() -> int { return sub->parsed() ? run(*a) : -1; };
}

}  // namespace strata::cli
