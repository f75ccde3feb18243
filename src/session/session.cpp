#include "session/session.h"

#include <algorithm>
#include <cstdio>

#include "core/log.h"
#include "core/units.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/device_info.h"
#include "session/run_plan.h"

namespace strata::session {

Result<std::unique_ptr<Session>> Session::finish_open(RunOptions options, std::shared_ptr<const runtime::Model> m,
                                                      bool header_only, bool* bad_options) {
  if (bad_options) *bad_options = false;
  auto sc = spec::parse_spec(options.spec, options.draft_max, m->spec.hp.n_layer);
  auto window = spec::parse_draft_window(options.draft_window);
  if (!sc || !window) {
    if (bad_options) *bad_options = true;
    return sc ? window.status() : sc.status();
  }
  sc->window = *window;
  std::unique_ptr<Session> s(new Session());
  s->opt_ = std::move(options);
  s->model_ = std::move(m);
  s->header_only_ = header_only;
  s->spec_ = *sc;
  return s;
}

Result<std::unique_ptr<Session>> Session::open(RunOptions options, bool* bad_options) {
  if (bad_options) *bad_options = false;
  auto m = runtime::Model::load(options.model);
  if (!m) return m.status();
  return finish_open(std::move(options), std::move(m.value()), false, bad_options);
}

Result<std::unique_ptr<Session>> Session::open_header(RunOptions options, bool* bad_options) {
  if (bad_options) *bad_options = false;
  auto f = gguf::File::open(options.model, {.require_data = false});
  if (!f) return f.status();
  auto m = std::make_shared<runtime::Model>(runtime::Model{std::move(f.value()), {}, {}});
  auto spec = model::spec_from_gguf(m->file);
  if (!spec) return spec.status();
  m->spec = std::move(spec.value());
  // No weight views: planning reads the file header and the spec only.
  return finish_open(std::move(options), std::move(m), true, bad_options);
}

Result<const tokenizer::Tokenizer*> Session::tokenizer() {
  if (!tok_) {
    auto t = tokenizer::Tokenizer::from_gguf(model_->file);
    if (!t) return t.status();
    tok_ = std::move(t.value());
  }
  return &*tok_;
}

// The prefill chunk when -b is not given. A chunk's matmuls dequantise every weight matrix to f16
// tiles once (kernels/cuda/matmul.cu), so the dequantisation and cuBLAS's efficiency at the chunk's
// column count set the prefill rate: the resident 27B's 4K prompt ran at 33 / 38 / 44 / 48% of the
// bf16 GEMM ceiling with 512 / 1024 / 2048 / 4096-token chunks (H200, 2026-12-02). Larger chunks
// cost activation memory, so the GPU takes the largest that leaves the resident weights, the KV and
// a tenth of the free memory spare. Under a VRAM budget that memory would push weights out to the
// stream, and the CPU engine gains nothing: both keep 512.
uint32_t Session::auto_ubatch(const runtime::ForwardOptions& fo) const {
  if (!opt_.vram.empty() || !opt_.uses_gpu()) return kDefaultUbatch;
  const auto devs = kernels::cuda::devices();
  if (devs.empty()) return kDefaultUbatch;
  const model::ModelSpec& s = model_->spec;
  uint64_t weights = 0;
  for (const auto& t : model_->file.tensors()) weights += t.n_bytes;
  const uint64_t per_token = 4ull * (3ull * s.hp.n_embd + 2ull * s.hp.n_ff + 2ull * s.q_width() + 2ull * s.kv_width()) +
                             2ull * std::max<uint64_t>(s.hp.n_embd, s.hp.n_ff);
  const uint64_t fixed = weights + (uint64_t(256) << 20);  // + GEMM tile, cuBLAS, logits, small buffers
  for (uint32_t ub : {4096u, 2048u, 1024u}) {
    const uint32_t chunk = std::min(ub, fo.n_ctx);
    if (chunk <= kDefaultUbatch) continue;
    const uint64_t need = fixed + runtime::kv_bytes_per_seq(s, fo.n_ctx, chunk, fo.k_type, fo.v_type) +
                          per_token * chunk;
    if (need <= devs[0].free_bytes / 10 * 9) return ub;
  }
  return kDefaultUbatch;
}

Result<runtime::ForwardOptions> Session::forward_options(uint32_t n_ctx_hint) const {
  runtime::ForwardOptions fo;
  auto types = opt_.kv_types();
  if (!types) return types.status();
  fo.k_type = types->first;
  fo.v_type = types->second;
  const bool budget = !opt_.vram.empty();
  if (budget && opt_.device == "cpu") return Status::error("--vram needs the CUDA engine (drop --device cpu)");
  auto cpu_blocks = opt_.cpu_blocks_mode();
  if (!cpu_blocks) return cpu_blocks.status();
  // auto (the default) plans without the cpu tier when there is no budget; asking for it does not.
  if (!budget && (*cpu_blocks == offload::CpuBlocks::on || opt_.kv_host != "none"))
    return Status::error("--cpu-blocks on and --kv-host place blocks under a budget: give --vram too");
  if (auto k = opt_.kv_host_layers(); !k) return k.status();
  const uint32_t train = model_->spec.hp.n_ctx_train;
  fo.n_ctx = opt_.n_ctx ? opt_.n_ctx
                        : std::max<uint32_t>(std::min<uint32_t>(train ? train : 4096, 4096), n_ctx_hint);
  fo.ubatch = std::min(opt_.ubatch == kUbatchAuto ? auto_ubatch(fo) : opt_.ubatch, fo.n_ctx);
  auto int8 = opt_.cpu_int8();
  if (!int8) return int8.status();
  fo.cpu_int8 = *int8;
  return fo;
}

// extra_vram: bytes the engine allocates beyond one session's (the KV caches of more sessions):
// the planner places the weights in the budget less those, and the engine's arena gets them back.
// plain: plan for plain decoding instead (no draft path, --require-draft-resident off) with the
// profile of the plan already made, and leave fo as it is (plan_plain).
Result<offload::ExecutorPlan> Session::plan_with_extra(runtime::ForwardOptions& fo, uint64_t extra_vram,
                                                       bool plain) const {
  RunOptions plain_opt;
  if (plain) {
    plain_opt = opt_;
    plain_opt.require_draft_resident = false;
  }
  auto in = budget_inputs(plain ? plain_opt : opt_, fo, plain && plan_ ? &plan_->profile : nullptr);
  if (!in) return in.status();
  if (extra_vram >= in->budgets.vram)
    return Status::error("--vram {}: the KV caches of {} sessions alone take {}", format_bytes(in->budgets.vram),
                         fo.n_seq,
                         format_bytes(extra_vram + runtime::kv_bytes_per_seq(model_->spec, fo.n_ctx, fo.ubatch,
                                                                             fo.k_type, fo.v_type)));
  in->budgets.vram -= extra_vram;
  auto e = plan_run(*model_, std::move(in.value()), plain ? std::nullopt : std::optional<spec::SpecConfig>(spec_));
  if (!e) {
    if (extra_vram == 0) return e.status();
    return Status::error("{} sessions: with {} of KV for the {} beyond the first: {}", fo.n_seq,
                         format_bytes(extra_vram), fo.n_seq - 1, e.message());
  }
  e->engine_vram_budget += extra_vram;
  e->budgets.vram += extra_vram;
  if (!plain) runtime::use_plan(*e, fo);
  return e;
}

uint64_t Session::extra_kv_vram(const runtime::ForwardOptions& fo) const {
  const uint64_t per_seq = runtime::kv_bytes_per_seq(model_->spec, fo.n_ctx, fo.ubatch, fo.k_type, fo.v_type);
  return uint64_t(std::max<uint32_t>(fo.n_seq, 1) - 1) * per_seq;
}

Result<offload::ExecutorPlan> Session::plan_plain(runtime::ForwardOptions fo) const {
  return plan_with_extra(fo, extra_kv_vram(fo), true);
}

Result<offload::ExecutorPlan> Session::plan_budget(runtime::ForwardOptions& fo) const {
  return plan_with_extra(fo, extra_kv_vram(fo));
}

Status Session::open_engine(uint32_t n_ctx_hint, uint32_t n_seq, uint32_t max_auto) {
  if (header_only_) return Status::error("{}: the file has no tensor data (header only); it can be planned, not run",
                                         opt_.model);
  engine_.reset();  // before the next one allocates (stress opens one per context length)
  max_auto = std::clamp<uint32_t>(max_auto, 1, kMaxAutoSessions);
  auto fo_r = forward_options(n_ctx_hint);
  if (!fo_r) return fo_r.status();
  runtime::ForwardOptions fo = std::move(fo_r.value());
  if (!opt_.trace_path.empty()) {
    trace_ = std::make_shared<Trace>();
    fo.trace = trace_;
  }
  log::debug("{}", model_->spec.summary());
  runtime::Device dev = runtime::Device::automatic;
  if (opt_.device == "cpu") dev = runtime::Device::cpu;
  else if (opt_.device == "cuda") dev = runtime::Device::cuda;
  else if (opt_.device != "auto") return Status::error("unknown --device '{}' (auto, cpu, cuda)", opt_.device);
  if (dev == runtime::Device::automatic)
    dev = kernels::cuda::devices().empty() ? runtime::Device::cpu : runtime::Device::cuda;
  plan_.reset();
  sessions_reason_.clear();
  const uint64_t per_seq = runtime::kv_bytes_per_seq(model_->spec, fo.n_ctx, fo.ubatch, fo.k_type, fo.v_type);
  if (!opt_.vram.empty()) {
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
        auto e = plan_with_extra(f, uint64_t(n - 1) * per_seq);
        if (!e) {
          if (n == 1) return e.status();
          break;  // more sessions leave even less room
        }
        const double tps = e->plan.prediction.decode_tps;  // the n sessions' aggregate (decode_rows = n)
        if (!chosen || tps > best * 1.02) {
          best = tps;
          best_n = n;
          chosen = std::move(e.value());
        }
      }
      sessions_reason_ = fmt::format("the planner's choice under --vram {}: {:.1f} tok/s predicted in all ({} of KV "
                                     "per session)",
                                     opt_.vram, best, format_bytes(per_seq));
      fo.n_seq = best_n;
      runtime::use_plan(*chosen, fo);
      plan_ = std::move(chosen);
    } else {
      fo.n_seq = n_seq;
      auto e = plan_with_extra(fo, uint64_t(n_seq - 1) * per_seq);
      if (!e) return e.status();
      plan_ = std::move(e.value());
    }
  } else if (n_seq == 0) {
    // No budget: as many sessions (up to kMaxAutoSessions) as leave room beside the weights.
    const uint64_t weights = model_->file.bytes().size();
    if (dev == runtime::Device::cuda) {
      auto mi = kernels::cuda::mem_info();
      if (!mi) return mi.status();
      // What the engine needs besides weights and KV (activations, logits, kernel and cuBLAS
      // scratch): a generous 1 GiB plus 5% of the card.
      const uint64_t reserve = weights + (1ull << 30) + mi->total_bytes / 20;
      const uint64_t room = mi->free_bytes > reserve ? mi->free_bytes - reserve : 0;
      fo.n_seq = uint32_t(std::clamp<uint64_t>(per_seq ? room / per_seq : max_auto, 1, max_auto));
      sessions_reason_ = fmt::format("{} of KV per session; {} free on the GPU beside {} of weights",
                                     format_bytes(per_seq), format_bytes(mi->free_bytes), format_bytes(weights));
    } else {
      // Measured: the CPU dot kernels decode the weights again for every row, so N sessions
      // stepping together gain little over one (README); --batch N still asks for them.
      fo.n_seq = 1;
      sessions_reason_ = "the CPU engine gains little from batching; --batch N asks for N";
    }
  } else {
    fo.n_seq = n_seq;
  }
  auto e = runtime::make_engine(model_, fo, dev);
  if (!e) return e.status();
  engine_ = std::move(e.value());
  return {};
}

void Session::report_plan() const {
  if (!plan_) return;
  const auto& e = *plan_;
  std::fputs(offload::plan_report(e.blocks, e.profile, e.budgets, e.shape, e.plan).c_str(), stderr);
}

void Session::report_measured(double decode_tps, uint64_t streamed, double decode_s, double host_compute_s) const {
  if (!plan_ || !engine_) return;
  const auto& p = plan_->plan;
  std::string extra =
      streamed && decode_s > 0 ? fmt::format(" | streamed {:.2f} GB/s H2D during decode", double(streamed) / decode_s / 1e9)
                               : std::string();
  if (host_compute_s > 0 && decode_s > 0 && decode_tps > 0)
    extra += fmt::format(" | CPU compute {:.2f} ms per token ({:.0f}% of decode; host tiers)",
                         1e3 * host_compute_s / (decode_tps * decode_s), 100 * host_compute_s / decode_s);
  // A plan made for speculation is compared with its speculative prediction (which assumes an
  // acceptance rate; the measured one is in the speculation statistics above).
  const bool spec = plan_->shape.speculative();
  const double predicted = spec ? p.prediction.spec_tps : p.prediction.decode_tps;
  const std::string what =
      spec ? fmt::format("predicted speculative at acceptance {:.2f}; {:.2f} plain", plan_->shape.acceptance,
                         p.prediction.decode_tps)
           : std::string("predicted");
  log::info("decode {:.2f} tok/s measured vs {:.2f} {} ({:.0f}%){} | VRAM peak {} of budget {} (arena {})", decode_tps,
            predicted, what, predicted > 0 ? 100.0 * decode_tps / predicted : 0.0, extra,
            format_bytes(engine_->vram_peak_bytes() + plan_->profile.cuda_context.bytes),
            format_bytes(plan_->budgets.vram), format_bytes(plan_->engine_vram_budget));
}

}  // namespace strata::session
