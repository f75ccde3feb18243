// strata plan -m M.gguf --profile configs/hw/X.toml --ctx N [...]: where every block goes and how
// fast it will run, from the GGUF header and a hardware profile alone (offload/planner.h).
#include <chrono>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_args.h"
#include "cli/placement_report.h"
#include "core/log.h"
#include "core/units.h"
#include "offload/planner.h"
#include "offload/spec_default.h"
#include "session/run_plan.h"
#include "session/session.h"

namespace strata::cli {
namespace {

struct PlanArgs {
  std::string model, profile, kv = "f16", kv_v, vram, pinned, host, disk, sweep;
  uint64_t ctx = 4096, prompt = 0, gen = 256;
  uint32_t prefill_group = offload::kPrefillGroupAuto;  // RunShape::prefill_group_reserve
  int draft_depth = -1;  // -1: n_layer / 4
  uint32_t draft_len = 4;
  double acceptance = 0.6;
  bool no_spec = false, json = false, require_draft = false;
  // The host tiers the planner may use. --cpu-blocks as the model commands take it (auto by default,
  // so plan shows the placement a run gets; --no-cpu-blocks is --cpu-blocks off). Host KV: the model
  // commands keep it opt-in (--kv-host); plan answers "where could it go", so it is allowed unless
  // --no-kv-host says no.
  std::string cpu_blocks = "auto", cpu_matmul = "auto";  // as generate (session/run_options.h says why)
  bool no_cpu_blocks = false, no_kv_host = false;
  // --spec / --draft-max as generate takes them (session::apply_speculation); empty: the
  // --draft-depth / --draft-len / --no-spec flags decide.
  std::string spec;
  uint32_t draft_max = 8;
  bool draft_flags = false;  // one of --draft-depth, --draft-len, --no-spec was given
};

Status apply_size(const std::string& text, uint64_t& dst, const char* flag) {
  if (text.empty()) return Status::ok();
  auto b = parse_bytes(text);
  if (!b) return Status::error("{}: {}", flag, b.message());
  dst = *b;
  return Status::ok();
}

// "vram=8,10,12GiB" -> (vram, [8GiB, 10GiB, 12GiB]); a unit on the last value applies to all.
Result<std::pair<std::string, std::vector<uint64_t>>> parse_sweep(const std::string& s) {
  const auto eq = s.find('=');
  if (eq == std::string::npos) return Status::error("--sweep: expected vram=8,12GiB or ctx=4096,131072");
  const std::string key = s.substr(0, eq);
  if (key != "vram" && key != "ctx") return Status::error("--sweep: unknown key '{}' (vram or ctx)", key);
  std::vector<std::string> items;
  std::stringstream ss(s.substr(eq + 1));
  for (std::string it; std::getline(ss, it, ',');) items.push_back(it);
  if (items.empty()) return Status::error("--sweep: no values");
  std::string unit;
  const auto& last = items.back();
  size_t k = last.size();
  while (k > 0 && std::isalpha(static_cast<unsigned char>(last[k - 1]))) --k;
  unit = last.substr(k);
  std::vector<uint64_t> vals;
  for (auto it : items) {
    if (key == "vram" && !it.empty() && std::isdigit(static_cast<unsigned char>(it.back()))) it += unit;
    if (key == "ctx") {
      auto b = parse_bytes(it);  // "128K" works as a count too
      if (!b) return Status::error("--sweep: {}", b.message());
      vals.push_back(*b);
    } else {
      auto b = parse_bytes(it);
      if (!b) return Status::error("--sweep: {}", b.message());
      vals.push_back(*b);
    }
  }
  return std::make_pair(key, vals);
}

// A profile without a GPU: the CPU engine computes every block where it lies (the cpu tier), so
// the executor's planner, which places blocks beside a VRAM budget, does not apply; this is the
// report `generate --device cpu` prints. Single plans only (--sweep varies VRAM or the context of a
// GPU plan).
int plan_without_gpu(const PlanArgs& a, const runtime::Model& model, const offload::HardwareProfile& prof,
                     offload::Budgets b, offload::RunShape r) {
  if (!a.sweep.empty()) {
    log::error("--sweep needs a profile with a GPU ({} has none)", a.profile);
    return 2;
  }
  auto blocks = offload::model_blocks(model.file, model.spec);
  if (!blocks) { log::error("{}", blocks.message()); return 1; }
  b.allow_cpu = true;
  r.draft_depth = 0;  // the CPU engine verifies a draft row by row: planned as plain decoding
  auto int8 = session::resolve_cpu_int8(a.cpu_matmul);
  if (!int8) { log::error("{}", int8.message()); return 2; }
  r.cpu_int8 = *int8;
  if (a.json) {
    auto p = offload::plan(*blocks, prof, b, r);
    if (!p) {
      std::printf("%s\n", nlohmann::json{{"schema", "strata.plan/1"}, {"feasible", false}, {"reason", p.message()}}.dump(2).c_str());
      log::error("{}: {}", a.model, p.message());
      return 1;
    }
    auto j = offload::plan_json(*blocks, prof, b, r, *p);
    j["feasible"] = true;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  auto p = print_placement_report({*blocks, prof, b, r}, stdout);
  if (!p) { log::error("{}: {}", a.model, p.message()); return 1; }
  std::printf("generate without --spec: %s\n",
              offload::default_speculation_cpu(*blocks, prof, r.cpu_int8, a.draft_max).reason.c_str());
  return 0;
}

int run_plan(const PlanArgs& a) {
  if (!a.spec.empty() && a.draft_flags) {
    log::error("give --spec (and --draft-max) or --draft-depth / --draft-len / --no-spec, not both");
    return 2;
  }
  // The header is enough; --spec is parsed against its layer count as generate parses it.
  session::RunOptions ro;
  ro.model = a.model;
  ro.spec = a.spec.empty() ? "none" : a.spec;
  ro.draft_max = a.draft_max;
  bool bad_options = false;
  auto sess = session::Session::open_header(ro, &bad_options);
  if (!sess) { log::error("{}", sess.message()); return bad_options ? 2 : 1; }
  const runtime::Model& model = (*sess)->model();
  std::optional<spec::SpecConfig> spec_cfg;
  if (!a.spec.empty()) spec_cfg = (*sess)->spec();
  auto prof = offload::load_profile(a.profile);
  if (!prof) { log::error("{}", prof.message()); return 1; }
  offload::Budgets b = offload::Budgets::of(*prof);
  for (auto [text, dst, flag] : {std::tuple{a.vram, &b.vram, "--vram"}, {a.pinned, &b.pinned, "--pinned"},
                                 {a.host, &b.host, "--host-ram"}, {a.disk, &b.disk, "--disk"}})
    if (auto s = apply_size(text, *dst, flag); !s) { log::error("{}", s.message()); return 2; }
  if (!a.pinned.empty() && a.host.empty()) b.host = std::max(b.host, b.pinned);
  if (b.pinned > b.host) b.pinned = b.host;  // pinned memory is host memory
  auto cpu_blocks = offload::cpu_blocks_from_name(a.no_cpu_blocks ? "off" : a.cpu_blocks);
  if (!cpu_blocks) { log::error("{}", cpu_blocks.message()); return 2; }
  if (a.no_kv_host) b.allow_host_kv = false;
  offload::RunShape r;
  r.ctx = a.ctx;
  r.prompt = a.prompt;
  r.prefill_group_reserve = a.prefill_group;
  r.gen = a.gen;
  auto kv = offload::kv_dtype_from_name(a.kv);
  if (!kv) { log::error("--kv: {}", kv.message()); return 2; }
  r.kv = *kv;
  if (!a.kv_v.empty()) {
    auto v = offload::kv_dtype_from_name(a.kv_v);
    if (!v) { log::error("--kv-v: {}", v.message()); return 2; }
    r.kv_v = *v;
  }
  const uint32_t n_layer = model.spec.hp.n_layer;
  r.draft_depth = a.no_spec ? 0 : a.draft_depth >= 0 ? uint32_t(a.draft_depth) : std::max(1u, n_layer / 4);
  r.draft_len = a.draft_len;
  r.acceptance = a.acceptance;
  r.require_draft_resident = a.require_draft;
  auto int8 = session::resolve_cpu_int8(a.cpu_matmul);
  if (!int8) { log::error("{}", int8.message()); return 2; }
  // With --spec, plan_run sets the draft depth and length from it, as for generate --spec. The run
  // is the CUDA engine's where the budget has VRAM.
  auto plan = [&](const offload::Budgets& bb, offload::RunShape rr) {
    rr.cpu_int8 = *int8;
    return session::plan_run(model, {*prof, bb, rr, std::nullopt, *cpu_blocks}, spec_cfg);
  };
  if (r.prompt >= r.ctx) { log::error("--prompt {} must be below --ctx {}", r.prompt, r.ctx); return 2; }

  if (!prof->has_gpu()) return plan_without_gpu(a, model, *prof, b, r);
  if (!a.sweep.empty()) {
    auto sw = parse_sweep(a.sweep);
    if (!sw) { log::error("{}", sw.message()); return 2; }
    nlohmann::json rows = nlohmann::json::array();
    if (!a.json)
      std::printf("%-12s %-9s %10s %10s %10s %8s  %s\n", sw->first.c_str(), "feasible", "decode", "spec", "prefill",
                  "ttft_s", "bottleneck / reason");
    for (uint64_t v : sw->second) {
      offload::Budgets bb = b;
      offload::RunShape rr = r;
      if (sw->first == "vram") bb.vram = v; else { rr.ctx = v; if (rr.prompt >= v) rr.prompt = 0; }
      auto p = plan(bb, rr);
      const std::string label = sw->first == "vram" ? format_bytes(v) : std::to_string(v);
      if (a.json) {
        nlohmann::json row = {{"key", sw->first}, {"value", v}, {"feasible", bool(p)}};
        if (p) row["plan"] = offload::plan_json(p->blocks, p->profile, p->budgets, p->shape, p->plan);
        else row["reason"] = p.message();
        rows.push_back(row);
      } else if (p) {
        const auto& pr = p->plan.prediction;
        std::printf("%-12s %-9s %10.2f %10.2f %10.0f %8.2f  %s\n", label.c_str(), "yes", pr.decode_tps, pr.spec_tps,
                    pr.prefill_tps, pr.ttft_s, pr.step.bottleneck(*prof).c_str());
      } else {
        std::printf("%-12s %-9s %10s %10s %10s %8s  %s\n", label.c_str(), "no", "-", "-", "-", "-", p.message().c_str());
      }
    }
    if (a.json) std::printf("%s\n", rows.dump(2).c_str());
    return 0;
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto p = plan(b, r);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!a.json) {
    if (!p) { log::error("{}: {}", a.model, p.message()); return 1; }
    print_plan_report(*p, ms, stdout);
    // What `generate` without --spec would run on this budget: it plans for plain decoding (this
    // plan, unless it was made for a draft) and decides on that placement (session/default_spec.h).
    // (A profile without a GPU left above: plan_without_gpu.)
    offload::RunShape plain = p->shape;  // with its resolved cpu_int8
    plain.draft_depth = 0;
    auto q = p->shape.speculative() ? session::plan_run(model, {*prof, b, plain, std::nullopt, *cpu_blocks}, std::nullopt)
                                    : std::move(p);
    if (q)
      std::printf("generate without --spec: %s\n",
                  offload::default_speculation(q->blocks, q->profile, q->plan.placement, q->shape, a.draft_max)
                      .reason.c_str());
    return 0;
  }
  if (!p) {
    std::printf("%s\n", nlohmann::json{{"schema", "strata.plan/1"}, {"feasible", false}, {"reason", p.message()}}.dump(2).c_str());
    log::error("{}: {}", a.model, p.message());
    return 1;
  }
  auto j = offload::plan_json(p->blocks, p->profile, p->budgets, p->shape, p->plan);
  j["feasible"] = true;
  j["planning_ms"] = ms;
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand("plan", "Where every weight and KV block goes and the predicted speed (no GPU needed)");
  sub->add_option("-m,--model", a->model, "GGUF model (the header is enough)")->required();
  sub->add_option("--profile", a->profile, "Hardware profile (configs/hw/*.toml)")->required();
  sub->add_option("-c,--ctx", a->ctx, "Target context length (KV is sized for it)");
  sub->add_option("--kv", a->kv, "KV dtype of K (and V): f16, q8 (int8, ggml Q8_0), q4 (int4, ggml Q4_1), or f32");
  sub->add_option("--kv-v", a->kv_v, "KV dtype of V when it differs from --kv's");
  sub->add_option("--prompt", a->prompt, "Prompt tokens (default: ctx - gen)");
  sub->add_option("--gen", a->gen, "Generated tokens");
  add_prefill_group_option(sub, a->prefill_group);
  sub->add_option("--spec", a->spec,
                  "Plan for the speculative decoding of generate --spec (none | early:d=N | subset | lookup | auto; "
                  "the same plan generate runs): early and auto draft with layers [0, N), the others plan as plain "
                  "decoding. Instead of --draft-depth / --draft-len / --no-spec");
  sub->add_option("--draft-max", a->draft_max, "With --spec: most tokens drafted per verify pass (1..15), the "
                                               "planner's draft length")
      ->capture_default_str();
  sub->add_option("--draft-depth", a->draft_depth, "Self-speculative draft depth d (default n_layer/4)");
  sub->add_option("--draft-len", a->draft_len, "Draft length k");
  sub->add_option("--acceptance", a->acceptance, "Assumed draft acceptance rate");
  sub->add_flag("--no-spec", a->no_spec, "Plan for plain decoding");
  sub->add_flag("--require-draft-resident", a->require_draft,
                "Keep the draft path in VRAM whenever it fits, even where predicted slower (offload/planner.h)");
  add_cpu_blocks_option(sub, a->cpu_blocks);
  sub->add_flag("--no-cpu-blocks", a->no_cpu_blocks, "Keep every weight block on the GPU tiers (--cpu-blocks off)")
      ->excludes("--cpu-blocks");
  sub->add_option("--cpu-matmul", a->cpu_matmul,
                  "The CPU's matmuls the cpu tier is priced at: auto (int8 where the budget has VRAM: the CUDA "
                  "engine's cpu-tier blocks; exact on a CPU-only profile), exact or int8 (as generate takes it)")
      ->capture_default_str();
  sub->add_flag("--no-kv-host", a->no_kv_host,
                "Keep every layer's KV in VRAM (as the model commands do with --kv-host none)");
  sub->add_option("--vram", a->vram, "Override the VRAM budget (e.g. 12GiB)");
  sub->add_option("--pinned", a->pinned, "Override the pinned-RAM budget");
  sub->add_option("--host-ram", a->host, "Override the host-RAM budget");
  sub->add_option("--disk", a->disk, "Override the NVMe budget");
  sub->add_option("--sweep", a->sweep, "What-if table: vram=8,10,12GiB or ctx=4096,32768,131072");
  sub->add_flag("--json", a->json, "JSON (schema strata.plan/1, offload/planner.cpp)");
  return {sub, [a, sub] {
            a->draft_flags = sub->count("--draft-depth") + sub->count("--draft-len") + sub->count("--no-spec") > 0;
            return run_plan(*a);
          }};
}

}  // namespace strata::cli
