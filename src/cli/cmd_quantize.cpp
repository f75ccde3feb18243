// strata quantize IN.gguf OUT.gguf TYPE: re-encode a model's matrices (q8_0, q4_k, q4_k_m, ...).
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "core/units.h"
#include "model/quantize.h"

namespace strata::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, type;
  int threads = 0;
  bool no_progress = false;
};

int run_quantize(const QuantizeArgs& a) {
  auto target = model::parse_quantize_target(a.type);
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
  auto sum = model::quantize_model(a.in, a.out, o);
  if (!sum) {
    log::error("quantize: {}", sum.message());
    return 1;
  }
  log::info("wrote {} ({}): {} -> {} ({:.1f}%), {} tensors re-encoded, {} copied, {:.1f} s", a.out, target->name,
            format_bytes(sum->in_bytes), format_bytes(sum->out_bytes),
            100.0 * double(sum->out_bytes) / double(std::max<uint64_t>(sum->in_bytes, 1)), sum->n_requantized,
            sum->n_copied, sum->seconds);
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  auto* sub = app.add_subcommand("quantize", "Re-encode a GGUF model's matrices to another type or a K-quant mix");
  sub->add_option("input", a->in, "Input GGUF (f32/f16/bf16 best; gemma3, llama, qwen3)")->required();
  sub->add_option("output", a->out, "Output GGUF (written to OUTPUT.partial, then renamed)")->required();
  sub->add_option("type", a->type, "f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs, or a mix: "
                                   "q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m")->required();
  sub->add_option("-t,--threads", a->threads, "Worker threads (default: all cores)");
  sub->add_flag("--no-progress", a->no_progress, "Do not show progress");
  return {sub, [a] { return run_quantize(*a); }};
}

}  // namespace strata::cli
