// strata stress -m M.gguf [--vram 12GiB --profile P] --ctx 4k:128k: ramps the context length
// (doubling), runs a prefill of the whole context minus the decode and a fixed decode at each
// length, and reports per length the bytes per tier (weights; KV by layer kind), peak VRAM, prefill
// tok/s with its time to first token, fraction of the GEMM ceilings and PCIe bytes per prompt token
// (cli/prefill_figures.h), and decode tok/s. Stops at the first length that fails, with the reason (the rows before it
// stand). Writes a table, JSON (--json) and an SVG plot of speed and memory vs context (--svg).
#include <algorithm>
#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_args.h"
#include "cli/output_file.h"
#include "cli/prefill_figures.h"
#include "cli/svg_plot.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/units.h"
#include "kv/kv_quant.h"
#include "runtime/sampler.h"
#include "session/session.h"

namespace strata::cli {
namespace {

struct StressArgs {
  ModelArgs m;
  std::string range = "4k:128k";
  uint32_t n_gen = 32;
  std::string json_out, svg_out;
};

// "4k:128k" (k = 1024, m = 1024^2, or plain tokens) -> doubling lengths from lo up to hi.
Result<std::vector<uint32_t>> parse_range(const std::string& s) {
  auto one = [](std::string t) -> Result<uint64_t> {
    uint64_t mul = 1;
    if (!t.empty() && (t.back() == 'k' || t.back() == 'K')) mul = 1024, t.pop_back();
    else if (!t.empty() && (t.back() == 'm' || t.back() == 'M')) mul = 1024 * 1024, t.pop_back();
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 9)
      return Status::error("not a token count");
    return std::stoull(t) * mul;
  };
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return Status::error("--ctx '{}': expected LO:HI, e.g. 4k:128k", s);
  auto lo = one(s.substr(0, colon)), hi = one(s.substr(colon + 1));
  if (!lo || !hi) return Status::error("--ctx '{}': expected LO:HI token counts, e.g. 4k:128k", s);
  if (*lo < 16 || *hi < *lo || *hi > (uint64_t(1) << 24))
    return Status::error("--ctx '{}': need 16 <= LO <= HI <= 16M", s);
  std::vector<uint32_t> out;
  for (uint64_t c = *lo; c <= *hi; c *= 2) out.push_back(uint32_t(c));
  if (out.back() != *hi) out.push_back(uint32_t(*hi));
  return out;
}

// KV bytes the engines allocate at context n_ctx, split by layer kind (ModelSpec::kv_slots: the
// one ring-size rule both engines size their KV by).
std::pair<uint64_t, uint64_t> kv_bytes(const model::ModelSpec& s, uint32_t n_ctx, uint32_t ubatch, GgmlType k,
                                       GgmlType v) {
  uint64_t swa = 0, full = 0;
  const uint64_t row = kv::kv_row_bytes(k, s.kv_width()) + kv::kv_row_bytes(v, s.kv_width());
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    (s.window(il) ? swa : full) += s.kv_slots(il, n_ctx, ubatch) * row;
  }
  return {swa, full};
}

int run(StressArgs& a) {
  auto lengths = parse_range(a.range);
  if (!lengths) {
    log::error("{}", lengths.message());
    return 2;
  }
  const auto limit = a.m.thread_limit();
  nlohmann::json rows = nlohmann::json::array();
  std::string stop_reason;
  fmt::print("{:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>11} {:>9} {:>8} {:>10} {:>10}\n", "ctx", "weights gpu",
             "weights host", "KV sliding", "KV full", "VRAM peak", "prefill t/s", "TTFT s", "% bf16", "PCIe/tok",
             "decode t/s");
  GemmCeilings gemm;  // measured once, at the first GPU length
  bool gemm_measured = false;
  // The model is opened once; each length gets its own engine (the previous one freed first).
  auto sess = session::Session::open(a.m);
  if (!sess) stop_reason = sess.message();
  for (uint32_t ctx : *lengths) {
    if (!sess) break;
    auto& ses = **sess;
    ses.set_n_ctx(ctx);
    if (Status s = ses.open_engine(ctx); !s) {
      stop_reason = s.message();
      break;
    }
    auto& f = ses.engine();
    const auto& spec = f.model().spec;
    if (a.n_gen + 1 >= ctx) {
      stop_reason = fmt::format("context {} leaves no room for a prompt before {} decoded tokens", ctx, a.n_gen);
      break;
    }
    Rng rng(ctx);
    std::vector<int32_t> prompt(ctx - a.n_gen - 1);
    for (auto& t : prompt) t = int32_t(rng.next_u32() % spec.hp.n_vocab);
    std::vector<float> logits;
    if (f.device_name() == "cuda" && !gemm_measured) gemm = measure_gemm_ceilings(), gemm_measured = true;
    const uint64_t streamed0 = f.streamed_bytes();
    const auto t0 = std::chrono::steady_clock::now();
    if (Status s = f.eval(prompt, runtime::Logits::last, logits); !s) {
      stop_reason = fmt::format("prefill at context {}: {}", ctx, s.message());
      break;
    }
    const auto t1 = std::chrono::steady_clock::now();
    const PrefillRun prefill{prompt.size(), std::chrono::duration<double>(t1 - t0).count(), f.streamed_bytes() - streamed0};
    Status failed;
    for (uint32_t i = 0; i < a.n_gen && failed.is_ok(); ++i) {
      const int32_t next = runtime::argmax(logits);
      failed = f.eval(std::span(&next, 1), runtime::Logits::last, logits);
    }
    if (!failed.is_ok()) {
      stop_reason = fmt::format("decode at context {}: {}", ctx, failed.message());
      break;
    }
    const auto t2 = std::chrono::steady_clock::now();
    const double pp = double(prompt.size()) / std::chrono::duration<double>(t1 - t0).count();
    const double tg = a.n_gen / std::chrono::duration<double>(t2 - t1).count();
    uint64_t w_gpu = 0, w_host = 0;
    if (ses.executor_plan()) {
      const auto& e = *ses.executor_plan();
      const auto& pl = e.plan.placement;
      auto add = [&](const offload::WeightBlock& b, offload::Tier t) { (t == offload::Tier::gpu ? w_gpu : w_host) += b.bytes; };
      for (uint32_t il = 0; il < e.blocks.n_layer; ++il) add(e.blocks.attention[il], pl.attention[il]), add(e.blocks.ffn[il], pl.ffn[il]);
      add(e.blocks.head, pl.head);
    } else {
      uint64_t all = 0;
      auto bytes = [](const kernels::WeightView& v) { return v.row_bytes * uint64_t(v.n_out); };
      const auto& w = f.model().weights;
      all += bytes(w.output);
      for (const auto& l : w.layers)
        all += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.ffn_gate) + bytes(l.ffn_up) + bytes(l.ffn_down);
      (f.device_name() == "cuda" ? w_gpu : w_host) = all;
    }
    const auto types = a.m.kv_types();  // valid: the engine was opened with them
    const auto [kv_swa, kv_full] = kv_bytes(spec, ctx, f.ubatch(), types->first, types->second);
    nlohmann::json r = {{"ctx", ctx},           {"weights_gpu_bytes", w_gpu}, {"weights_host_bytes", w_host},
                        {"kv_sliding_bytes", kv_swa}, {"kv_full_bytes", kv_full}, {"vram_peak_bytes", f.vram_peak_bytes()},
                        {"prefill_tok_per_s", pp}, {"decode_tok_per_s", tg}, {"device", std::string(f.device_name())}};
    r.update(prefill_json(prefill, f.model(), gemm));
    rows.push_back(r);
    const std::string of_bf16 = r.contains("prefill_fraction_of_bf16_gemm")
                                    ? fmt::format("{:.0f}%", 100 * r["prefill_fraction_of_bf16_gemm"].get<double>())
                                    : std::string("-");
    fmt::print("{:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>11.1f} {:>9.2f} {:>8} {:>10} {:>10.2f}\n", ctx,
               format_bytes(w_gpu), format_bytes(w_host), format_bytes(kv_swa), format_bytes(kv_full),
               format_bytes(f.vram_peak_bytes()), pp, prefill.seconds, of_bf16,
               format_bytes(prefill.streamed_bytes / std::max<uint64_t>(1, prefill.n_prompt)), tg);
    std::fflush(stdout);
  }
  if (!stop_reason.empty()) fmt::print("stopped: {}\n", stop_reason);
  nlohmann::json j = {{"stress", a.m.model}, {"range", a.range}, {"n_gen", a.n_gen}, {"rows", rows},
                      {"stopped", stop_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(stop_reason)}};
  if (!a.json_out.empty()) {
    if (Status s = write_output_file(a.json_out, j.dump(2) + "\n"); !s) {
      log::error("{}", s.message());
      return 1;
    }
  }
  if (!a.svg_out.empty()) {
    PlotSeries pp{"prefill tok/s", {}, {}}, tg{"decode tok/s", {}, {}}, kvs{"KV sliding", {}, {}},
        kvf{"KV full", {}, {}}, vram{"VRAM peak", {}, {}};
    for (const auto& r : rows) {
      const double x = r["ctx"].get<double>();
      for (auto* s : {&pp, &tg, &kvs, &kvf, &vram}) s->x.push_back(x);
      pp.y.push_back(r["prefill_tok_per_s"].get<double>());
      tg.y.push_back(r["decode_tok_per_s"].get<double>());
      kvs.y.push_back(r["kv_sliding_bytes"].get<double>());
      kvf.y.push_back(r["kv_full_bytes"].get<double>());
      vram.y.push_back(r["vram_peak_bytes"].get<double>());
    }
    std::vector<PlotPanel> panels = {{"prefill speed", "tokens/s", {pp}}, {"decode speed", "tokens/s", {tg}},
                                     {"memory", "bytes", {kvs, kvf, vram}}};
    if (Status s = write_output_file(a.svg_out, svg_line_chart(panels, "context length (tokens)")); !s) {
      log::error("{}", s.message());
      return 1;
    }
  }
  return rows.empty() ? 1 : 0;
}

}  // namespace

Command add_stress(CLI::App& app) {
  auto a = std::make_shared<StressArgs>();
  auto* sub = app.add_subcommand("stress", "Ramp the context length (doubling) and report memory per tier and "
                                           "speed at each length, until something breaks");
  a->m.add_to(sub);
  sub->add_option("--ctx", a->range, "Context lengths LO:HI, doubling (k = 1024), e.g. 4k:128k")->capture_default_str();
  sub->add_option("-n,--n-gen", a->n_gen, "Tokens decoded at each length")->capture_default_str()->check(CLI::Range(1, 4096));
  sub->add_option("--json", a->json_out, "Write the rows as JSON to this file");
  sub->add_option("--svg", a->svg_out, "Write a plot of speed and memory vs context (SVG) to this file");
  return {sub, [a] { return run(*a); }};
}

}  // namespace strata::cli
