// strata quantize [--imatrix F] [--mix M] IN.gguf OUT.gguf [TYPE]: re-encode a model's matrices
// (q8_0, q4_k, iq3_xxs, ... or a mix q4_k_m, iq3_xxs, ...).
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "core/units.h"
#include "model/quantize.h"

namespace strata::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, type, mix, imatrix;
  int threads = 0;
  bool no_progress = false, allow_no_imatrix = false;
};

int run_quantize(const QuantizeArgs& a) {
  if (a.type.empty() == a.mix.empty()) {
    log::error("quantize: give either a TYPE or --mix M (not both)");
    return 2;
  }
  auto target = a.mix.empty() ? model::parse_quantize_target(a.type) : model::parse_quantize_mix(a.mix);
  if (!target) {
    log::error("{}", target.message());
    return 2;
  }
  if (a.in == a.out) {
    log::error("quantize: the output must be another file than the input ({})", a.in);
    return 2;
  }
  model::QuantizeOptions o;
  o.target = *target;
  o.threads = a.threads;
  o.progress = !a.no_progress;
  o.allow_no_imatrix = a.allow_no_imatrix;
  if (!a.imatrix.empty()) {
    auto m = model::read_imatrix(a.imatrix);
    if (!m) {
      log::error("quantize: {}", m.message());
      return 2;
    }
    log::info("imatrix {}: {} entries, {} chunks of {} tokens", a.imatrix, m->entries.size(), m->chunk_count,
              m->chunk_size);
    o.imatrix = std::make_shared<const model::Imatrix>(std::move(*m));
  }
  auto sum = model::quantize_model(a.in, a.out, o);
  if (!sum) {
    log::error("quantize: {}", sum.message());
    return 1;
  }
  log::info("wrote {} ({}): {} -> {} ({:.1f}%), {} tensors re-encoded ({} with the imatrix), {} copied, {:.1f} s "
            "({:.1f} MiB/s of input)", a.out, target->name, format_bytes(sum->in_bytes), format_bytes(sum->out_bytes),
            100.0 * double(sum->out_bytes) / double(std::max<uint64_t>(sum->in_bytes, 1)), sum->n_requantized,
            sum->n_with_imatrix, sum->n_copied, sum->seconds,
            double(sum->in_bytes) / (1024.0 * 1024.0) / std::max(sum->seconds, 1e-9));
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  auto* sub = app.add_subcommand("quantize", "Re-encode a GGUF model's matrices to another type or a quant mix");
  sub->add_option("input", a->in, "Input GGUF (f32/f16/bf16 best; gemma3, llama, qwen3)")->required();
  sub->add_option("output", a->out, "Output GGUF (written to OUTPUT.partial, then renamed)")->required();
  sub->add_option("type", a->type, "f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs "
                                   "iq3_xxs iq3_s iq2_xxs iq2_xs iq2_s iq1_s iq1_m, or a mix: q3_k_s q3_k_m q3_k_l "
                                   "q4_k_s q4_k_m");
  sub->add_option("--mix", a->mix, "A llama.cpp-like per-tensor mix instead of TYPE: q3_k_s q3_k_m q3_k_l q4_k_s "
                                   "q4_k_m iq3_xxs iq3_xs iq3_m iq2_m iq4_xs");
  sub->add_option("--imatrix", a->imatrix, "Importance matrix (strata imatrix or llama-imatrix GGUF) for the "
                                           "i-quants");
  sub->add_flag("--allow-no-imatrix", a->allow_no_imatrix,
                "Quantise to iq2_xxs / iq2_xs / iq1_s without an imatrix (uniform importance; poor quality)");
  sub->add_option("-t,--threads", a->threads, "Worker threads (default: all cores)");
  sub->add_flag("--no-progress", a->no_progress, "Do not show progress");
  return {sub, [a] { return run_quantize(*a); }};
}

}  // namespace strata::cli
