// strata synth: write a synthetic GGUF model (deterministic seeded weights) of a preset shape.
#include <memory>
#include <optional>

#include "cli/command.h"
#include "core/log.h"
#include "core/units.h"
#include "model/synth.h"

namespace strata::cli {
namespace {

struct SynthArgs {
  std::string arch = "gemma3";
  std::string preset = "tiny";
  std::string type;  // default per preset
  std::string mix;
  std::string out;
  uint64_t seed = 42;
  int threads = 0;
  bool no_progress = false;
  bool header_only = false;
  std::optional<uint32_t> n_vocab, n_ctx, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, window;
};

int run_synth(const SynthArgs& a) {
  model::SynthOptions o;
  const auto arch = model::arch_from_name(a.arch);
  if (!arch) {
    log::error("unknown architecture '{}' (have: gemma3, llama, qwen3)", a.arch);
    return 2;
  }
  o.arch = *arch;
  o.preset = a.preset;
  if (Status s = model::apply_preset(o); !s) {
    log::error("{}", s.message());
    return 2;
  }
  if (!a.type.empty() && !a.mix.empty()) {
    log::error("--type and --mix exclude each other");
    return 2;
  }
  const std::string type_name = !a.type.empty() ? a.type : (a.mix.empty() ? (a.preset == "tiny" ? "f32" : "q4_k") : "");
  if (!type_name.empty()) {
    const auto t = ggml_type_from_name(type_name);
    if (!t || !ggml_type_info(*t).has_cpu_kernels) {
      log::error("unknown or unsupported --type '{}' (have: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k "
                 "q4_k q5_k q6_k iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m iq4_nl iq4_xs)", type_name);
      return 2;
    }
    o.type = *t;
  }
  o.mix = a.mix;
  o.seed = a.seed;
  o.threads = a.threads;
  o.progress = !a.no_progress;
  o.header_only = a.header_only;
  auto& hp = o.hp;
  if (a.n_vocab) hp.n_vocab = *a.n_vocab;
  if (a.n_ctx) hp.n_ctx_train = *a.n_ctx;
  if (a.n_embd) hp.n_embd = *a.n_embd;
  if (a.n_layer) hp.n_layer = *a.n_layer;
  if (a.n_head) hp.n_head = *a.n_head;
  if (a.n_head_kv) hp.n_head_kv = *a.n_head_kv;
  if (a.head_dim) hp.n_embd_head = *a.head_dim;
  if (a.n_ff) hp.n_ff = *a.n_ff;
  if (a.window) hp.n_swa = *a.window;
  if (Status s = model::validate(hp, o.arch); !s) {
    log::error("{}", s.message());
    return 2;
  }
  const std::string out = !a.out.empty() ? a.out
                                         : fmt::format("synth-{}-{}-{}.gguf", a.arch, a.preset,
                                                       a.mix.empty() ? type_name : a.mix);
  auto sum = model::write_synthetic_model(o, out);
  if (!sum) {
    log::error("{}", sum.message());
    return 1;
  }
  log::info("wrote {}{}: {} tensors, {} parameters, {} in {:.1f} s ({}/s)", out, o.header_only ? " (header only)" : "", sum->n_tensors,
            format_count(sum->n_params), format_bytes(sum->file_bytes), sum->seconds,
            format_bytes(uint64_t(double(sum->file_bytes) / std::max(sum->seconds, 1e-9))));
  fmt::print("{}\n", out);
  return 0;
}

}  // namespace

Command add_synth(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  auto* sub = app.add_subcommand(
      "synth", "Write a synthetic GGUF model with deterministic seeded weights (for tests and benchmarks)");
  sub->add_option("--arch", a->arch, "Architecture: gemma3, llama, qwen3")->capture_default_str();
  sub->add_option("--preset", a->preset,
                  "Shape: tiny (a few MB), 1b (gemma3-1b / Llama-3.2-1B / Qwen3-1.7B shapes), "
                  "27b (gemma3-27B shapes; gemma3 only)")->capture_default_str();
  sub->add_option("--type", a->type, "One type for every matrix: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 "
                                     "q2_k q3_k q4_k q5_k q6_k, an i-quant iq2_xxs ... iq4_xs (default: f32 for "
                                     "tiny, q4_k otherwise)");
  sub->add_option("--mix", a->mix, "A llama.cpp-like per-tensor mix: q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m iq3_xxs "
                                   "iq3_xs iq3_m iq2_m iq4_xs");
  sub->add_option("-o,--out", a->out, "Output file (default: synth-ARCH-PRESET-TYPE.gguf)");
  sub->add_option("--seed", a->seed, "Random seed (same seed, same file)")->capture_default_str();
  sub->add_option("-t,--threads", a->threads, "Worker threads (default: all cores)");
  sub->add_flag("--no-progress", a->no_progress, "Do not show progress");
  sub->add_flag("--header-only", a->header_only,
                "Write only the metadata and tensor table (a stand-in for a model not downloaded)");
  sub->add_option("--n-vocab", a->n_vocab, "Override: vocabulary size");
  sub->add_option("--ctx", a->n_ctx, "Override: training context length");
  sub->add_option("--n-embd", a->n_embd, "Override: embedding width");
  sub->add_option("--n-layer", a->n_layer, "Override: number of layers");
  sub->add_option("--n-head", a->n_head, "Override: attention heads");
  sub->add_option("--n-head-kv", a->n_head_kv, "Override: KV heads");
  sub->add_option("--head-dim", a->head_dim, "Override: head dimension");
  sub->add_option("--n-ff", a->n_ff, "Override: FFN width");
  sub->add_option("--window", a->window, "Override: sliding window (gemma3)");
  return {sub, [a] { return run_synth(*a); }};
}

}  // namespace strata::cli
