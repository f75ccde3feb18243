#include "cli/model_args.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "cli/output_file.h"
#include "core/log.h"
#include "core/units.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/device_info.h"
#include "kv/kv_quant.h"
#include "offload/default_profile.h"

namespace strata::cli {

void ModelArgs::add_to(CLI::App* sub) {
  sub->add_option("-m,--model", model, "GGUF model file")->required();
  sub->add_option("-c,--ctx-size", n_ctx, "Context length in tokens (default: enough for the job, at most 4096 "
                                          "unless asked, never more than the model allows)");
  sub->add_option("-t,--threads", threads, "CPU threads (default: all cores)");
  sub->add_option("-b,--ubatch", ubatch, "Tokens per prefill chunk")->capture_default_str()->check(CLI::Range(1, 65536));
  sub->add_option("--device", device, "Where to run: auto (the GPU when there is one), cpu, cuda")
      ->capture_default_str();
  sub->add_option("--cache-type", cache_type,
                  "KV cache type of K and V (-ctk/-ctv set one each): f32, f16, q8 (ggml Q8_0: int8 in groups "
                  "of 32 with an f16 scale, 1.06 bytes per value) or q4 (ggml Q4_1: int4 in groups of 32 with an "
                  "f16 scale and offset, 0.63 bytes per value); quantised types need head_dim % 32 == 0. "
                  "Default f32; f16 with --vram");
  sub->add_option("--cache-type-k", cache_type_k, "KV cache type of K (-ctk), overrides --cache-type");
  sub->add_option("--cache-type-v", cache_type_v, "KV cache type of V (-ctv), overrides --cache-type");
  sub->add_option("--vram", vram, "VRAM budget, e.g. 12GiB: the planner decides which weight blocks stay "
                                  "resident and the rest are streamed from pinned host RAM (CUDA)");
  sub->add_option("--pinned", pinned, "Pinned host-RAM budget for streamed weights (default: the profile's)");
  sub->add_option("--profile", profile, "Hardware profile for planning (configs/hw/*.toml; default: this GPU "
                                        "with typical rates)");
  sub->add_option("--prefetch", prefetch, "Streamed blocks in flight ahead of compute (the staging ring has "
                                          "this many + 1 slots)")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  sub->add_flag("--cpu-blocks", cpu_blocks, "With --vram: let the planner put weight blocks on the cpu tier (kept in "
                                            "host RAM and computed there by the CPU; only activations cross PCIe)");
  sub->add_option("--kv-host", kv_host, "With --vram: full-attention layers whose KV lives in host RAM, attention "
                                        "computed on the CPU: none, auto (the planner decides), all, or a count N "
                                        "(the deepest N layers)")
      ->capture_default_str();
  sub->add_option("--trace", trace_path, "Write a Chrome/Perfetto trace of the run to this file (open it in "
                                         "ui.perfetto.dev): compute per weight block on the CPU or GPU, streamed "
                                         "copies, host steps. The decode step then runs without CUDA graphs.");
}

offload::KvDtype planner_kv_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return offload::KvDtype::f16;
    case GgmlType::Q8_0: return offload::KvDtype::q8;
    case GgmlType::Q4_1: return offload::KvDtype::q4;
    default: return offload::KvDtype::f32;
  }
}

namespace {

// Plans the placement for a --vram budget and sets the engine's placement and budgets. extra_vram: bytes the
// engine allocates beyond one session's (the KV caches of more sessions): the planner places the
// weights in the budget less those, and the engine's arena gets them back.
Result<offload::ExecutorPlan> plan_budget(const ModelArgs& a, const runtime::Model& m, runtime::ForwardOptions& fo,
                                          uint64_t extra_vram = 0) {
  offload::HardwareProfile prof;
  if (!a.profile.empty()) {
    auto p = offload::load_profile(a.profile);
    if (!p) return p.status();
    prof = std::move(p.value());
  } else {
    prof = offload::detected_profile(true);
  }
  offload::Budgets b = offload::Budgets::of(prof);
  auto v = parse_bytes(a.vram);
  if (!v) return Status::error("--vram: {}", v.message());
  b.vram = *v;
  if (!a.pinned.empty()) {
    auto p = parse_bytes(a.pinned);
    if (!p) return Status::error("--pinned: {}", p.message());
    b.pinned = *p;
    b.host = std::max(b.host, b.pinned);
  }
  if (extra_vram >= b.vram)
    return Status::error("--vram {}: the KV caches of {} sessions alone take {}", format_bytes(b.vram), fo.n_seq,
                         format_bytes(extra_vram + runtime::kv_bytes_per_seq(m.spec, fo.n_ctx, fo.ubatch, fo.k_type,
                                                                             fo.v_type)));
  b.vram -= extra_vram;
  offload::RunShape r;
  r.ctx = fo.n_ctx;
  r.kv = planner_kv_dtype(fo.k_type);
  if (fo.v_type != fo.k_type) r.kv_v = planner_kv_dtype(fo.v_type);
  r.prefill_chunk = fo.ubatch;
  r.prefetch_depth = a.prefetch;
  r.draft_depth = 0;
  b.allow_cpu = a.cpu_blocks;
  auto kv_host = a.kv_host_layers();
  if (!kv_host) return kv_host.status();
  auto e = offload::plan_for_executor(m.file, m.spec, std::move(prof), b, r, *kv_host);
  if (!e) {
    if (extra_vram == 0) return e.status();
    return Status::error("{} sessions: with {} of KV for the {} beyond the first: {}", fo.n_seq,
                         format_bytes(extra_vram), fo.n_seq - 1, e.message());
  }
  e->engine_vram_budget += extra_vram;
  e->budgets.vram += extra_vram;
  runtime::use_plan(*e, fo);
  return e;
}

// Aggregate decode tokens/s the cost model predicts for n sessions stepping together on a plan.
double predicted_aggregate_tps(const offload::ExecutorPlan& e, uint32_t n) {
  const auto c = offload::sweep_cost(e.blocks, e.profile, e.plan.placement, e.shape, 0, e.blocks.n_layer, true, n,
                                     e.shape.decode_pos(), false);
  return c.total_s() > 0 ? double(n) / c.total_s() : 0.0;
}

}  // namespace

void ModelArgs::report_plan() const {
  if (!executor_plan) return;
  const auto& e = *executor_plan;
  std::fputs(offload::plan_report(e.blocks, e.profile, e.budgets, e.shape, e.plan).c_str(), stderr);
}

void ModelArgs::report_measured(const runtime::Engine& e, double decode_tps, uint64_t streamed, double decode_s,
                                double host_compute_s) const {
  if (!executor_plan) return;
  const auto& p = executor_plan->plan;
  std::string extra =
      streamed && decode_s > 0 ? fmt::format(" | streamed {:.2f} GB/s H2D during decode", double(streamed) / decode_s / 1e9)
                               : std::string();
  if (host_compute_s > 0 && decode_s > 0 && decode_tps > 0)
    extra += fmt::format(" | CPU compute {:.2f} ms per token ({:.0f}% of decode; host tiers)",
                         1e3 * host_compute_s / (decode_tps * decode_s), 100 * host_compute_s / decode_s);
  log::info("decode {:.2f} tok/s measured vs {:.2f} predicted ({:.0f}%){} | VRAM peak {} of budget {} (arena {})",
            decode_tps, p.prediction.decode_tps, p.prediction.decode_tps > 0 ? 100.0 * decode_tps / p.prediction.decode_tps : 0.0,
            extra, format_bytes(e.vram_peak_bytes() + executor_plan->profile.cuda_context.bytes),
            format_bytes(executor_plan->budgets.vram), format_bytes(executor_plan->engine_vram_budget));
}

Status ModelArgs::write_trace() const {
  if (!trace) return {};
  STRATA_TRY(write_output_file(trace_path, trace->json()));
  log::info("trace: {} spans written to {} (open in ui.perfetto.dev){}", trace->size(), trace_path,
            trace->dropped() ? fmt::format("; {} later spans dropped (trace full)", trace->dropped()) : std::string());
  return {};
}

std::unique_ptr<tbb::global_control> ModelArgs::thread_limit() const {
  if (threads <= 0) return nullptr;
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, size_t(threads));
}

Result<std::optional<uint32_t>> ModelArgs::kv_host_layers() const {
  if (kv_host == "auto") return std::optional<uint32_t>();
  if (kv_host == "none") return std::optional<uint32_t>(0);
  if (kv_host == "all") return std::optional<uint32_t>(offload::kAllKvLayers);
  uint32_t n = 0;
  const auto [end, ec] = std::from_chars(kv_host.data(), kv_host.data() + kv_host.size(), n);
  if (ec != std::errc() || end != kv_host.data() + kv_host.size() || kv_host.empty())
    return Status::error("--kv-host: '{}' is not none, auto, all or a layer count", kv_host);
  return std::optional<uint32_t>(n);
}

Result<std::pair<GgmlType, GgmlType>> ModelArgs::kv_types() const {
  // f16 under a budget: the planner's VRAM accounting assumes it unless asked otherwise.
  const GgmlType def = vram.empty() ? GgmlType::F32 : GgmlType::F16;
  auto parse = [&](const std::string& name, const char* flag, GgmlType fallback) -> Result<GgmlType> {
    if (name.empty()) return fallback;
    if (auto t = kv::kv_type_from_name(name)) return *t;
    return Status::error("{}: unknown KV cache type '{}' (f32, f16, q8, q4)", flag, name);
  };
  auto both = parse(cache_type, "--cache-type", def);
  if (!both) return both.status();
  auto k = parse(cache_type_k, "--cache-type-k", *both);
  if (!k) return k.status();
  auto v = parse(cache_type_v, "--cache-type-v", *both);
  if (!v) return v.status();
  return std::pair{*k, *v};
}

Result<std::unique_ptr<runtime::Engine>> ModelArgs::open(uint32_t n_ctx_hint, uint32_t n_seq, uint32_t max_auto) const {
  max_auto = std::clamp<uint32_t>(max_auto, 1, kMaxAutoSessions);
  runtime::ForwardOptions fo;
  if (!trace_path.empty()) {
    trace = std::make_shared<Trace>();
    fo.trace = trace;
  }
  auto types = kv_types();
  if (!types) return types.status();
  fo.k_type = types->first;
  fo.v_type = types->second;
  const bool budget = !vram.empty();
  if (budget && device == "cpu") return Status::error("--vram needs the CUDA engine (drop --device cpu)");
  if (!budget && (cpu_blocks || kv_host != "none"))
    return Status::error("--cpu-blocks and --kv-host place blocks under a budget: give --vram too");
  if (auto k = kv_host_layers(); !k) return k.status();
  auto m = runtime::Model::load(model);
  if (!m) return m.status();
  const uint32_t train = (*m)->spec.hp.n_ctx_train;
  fo.n_ctx = n_ctx ? n_ctx : std::max<uint32_t>(std::min<uint32_t>(train ? train : 4096, 4096), n_ctx_hint);
  fo.ubatch = std::min(ubatch, fo.n_ctx);
  log::debug("{}", (*m)->spec.summary());
  runtime::Device dev = runtime::Device::automatic;
  if (device == "cpu") dev = runtime::Device::cpu;
  else if (device == "cuda") dev = runtime::Device::cuda;
  else if (device != "auto") return Status::error("unknown --device '{}' (auto, cpu, cuda)", device);
  if (dev == runtime::Device::automatic)
    dev = kernels::cuda::devices().empty() ? runtime::Device::cpu : runtime::Device::cuda;
  executor_plan.reset();
  sessions_reason.clear();
  const uint64_t per_seq = runtime::kv_bytes_per_seq((*m)->spec, fo.n_ctx, fo.ubatch, fo.k_type, fo.v_type);
  if (budget) {
    if (kernels::cuda::devices().empty()) return Status::error("--vram needs a CUDA GPU, and none is usable here");
    dev = runtime::Device::cuda;
    if (n_seq == 0) {
      // The planner's choice: for each n, the best placement of the weights beside n KV caches and
      // the aggregate decode rate the cost model predicts for n sessions stepping together; the
      // fastest n wins (a larger n only when it is predicted at least 2% faster).
      double best = 0;
      std::optional<offload::ExecutorPlan> chosen;
      uint32_t best_n = 1;
      for (uint32_t n = 1; n <= max_auto; ++n) {
        runtime::ForwardOptions f = fo;
        f.n_seq = n;
        auto e = plan_budget(*this, **m, f, uint64_t(n - 1) * per_seq);
        if (!e) {
          if (n == 1) return e.status();
          break;  // more sessions leave even less room
        }
        const double tps = predicted_aggregate_tps(*e, n);
        if (!chosen || tps > best * 1.02) {
          best = tps;
          best_n = n;
          chosen = std::move(e.value());
        }
      }
      n_seq = best_n;
      sessions_reason = fmt::format("the planner's choice under --vram {}: {:.1f} tok/s predicted in all ({} of KV "
                                    "per session)",
                                    vram, best, format_bytes(per_seq));
      fo.n_seq = n_seq;
      runtime::use_plan(*chosen, fo);
      executor_plan = std::move(chosen);
    } else {
      fo.n_seq = n_seq;
      auto e = plan_budget(*this, **m, fo, uint64_t(n_seq - 1) * per_seq);
      if (!e) return e.status();
      executor_plan = std::move(e.value());
    }
  } else if (n_seq == 0) {
    // No budget: as many sessions (up to kMaxAutoSessions) as leave room beside the weights.
    const uint64_t weights = (*m)->file.bytes().size();
    if (dev == runtime::Device::cuda) {
      auto mi = kernels::cuda::mem_info();
      if (!mi) return mi.status();
      // What the engine needs besides weights and KV (activations, logits, kernel and cuBLAS
      // scratch): a generous 1 GiB plus 5% of the card.
      const uint64_t reserve = weights + (1ull << 30) + mi->total_bytes / 20;
      const uint64_t room = mi->free_bytes > reserve ? mi->free_bytes - reserve : 0;
      n_seq = uint32_t(std::clamp<uint64_t>(per_seq ? room / per_seq : max_auto, 1, max_auto));
      sessions_reason = fmt::format("{} of KV per session; {} free on the GPU beside {} of weights",
                                    format_bytes(per_seq), format_bytes(mi->free_bytes), format_bytes(weights));
    } else {
      // Measured: the CPU dot kernels decode the weights again for every row, so N sessions
      // stepping together gain little over one (README); --batch N still asks for them.
      n_seq = 1;
      sessions_reason = "the CPU engine gains little from batching; --batch N asks for N";
    }
    fo.n_seq = n_seq;
  } else {
    fo.n_seq = n_seq;
  }
  return runtime::make_engine(m.value(), fo, dev);
}

}  // namespace strata::cli
