// strata bench: performance figures against ceilings measured in the same run, as JSON.
//   strata bench decode -m M.gguf: CPU decode tok/s and the weight bytes it streams per token,
//   against the host's measured read bandwidth (decode at batch 1 is bound by that read).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "cli/command.h"
#include "cli/model_args.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/units.h"
#include "kernels/cpu/memory_bandwidth.h"
#include "runtime/sampler.h"

namespace strata::cli {
namespace {

struct BenchDecodeArgs {
  ModelArgs m;
  uint32_t n_prompt = 16;
  uint32_t n_gen = 64;
  std::string json_out;
  int reps = 3;
};

// Bytes of weights one decode step reads: every layer matrix, the head, one embedding row.
uint64_t weight_bytes_per_token(const runtime::Model& model) {
  const auto& w = model.weights;
  auto bytes = [](const kernels::WeightView& v) { return v.row_bytes * uint64_t(v.n_out); };
  uint64_t b = bytes(w.output) + w.token_embd.row_bytes;
  for (const auto& l : w.layers)
    b += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.ffn_gate) + bytes(l.ffn_up) + bytes(l.ffn_down);
  return b;
}

int run_bench_decode(const BenchDecodeArgs& a) {
  const auto limit = a.m.thread_limit();
  const int threads = a.m.threads > 0 ? a.m.threads
                                      : int(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  auto fwd = a.m.open(a.n_prompt + a.n_gen + 1);
  if (!fwd) {
    log::error("{}", fwd.message());
    return 1;
  }
  auto& f = **fwd;
  const uint64_t per_token = weight_bytes_per_token(f.model());
  // The ceiling: a read of 4x the per-token bytes (1..8 GiB), well beyond any cache.
  const uint64_t probe = std::clamp<uint64_t>(4 * per_token, kGiB, 8 * kGiB);
  log::info("measuring host read bandwidth ({} buffer, {} threads)...", format_bytes(probe), threads);
  const double ceiling = kernels::cpu::measure_read_bandwidth(probe, 5);

  Rng rng(1);
  std::vector<int32_t> prompt(a.n_prompt);
  for (auto& t : prompt) t = int32_t(rng.next_u32() % f.model().spec.hp.n_vocab);
  double best_tps = 0;
  std::vector<double> runs;
  for (int r = 0; r < a.reps; ++r) {
    f.truncate(0);
    std::vector<float> logits;
    if (Status s = f.eval(prompt, runtime::Logits::last, logits); !s) {
      log::error("{}", s.message());
      return 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < a.n_gen; ++i) {
      const int32_t next = runtime::argmax(logits);
      if (Status s = f.eval(std::span(&next, 1), runtime::Logits::last, logits); !s) {
        log::error("{}", s.message());
        return 1;
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    runs.push_back(a.n_gen / s);
    best_tps = std::max(best_tps, a.n_gen / s);
  }
  const double achieved = best_tps * double(per_token) / 1e9;
  nlohmann::json j = {
      {"bench", "decode"}, {"model", a.m.model}, {"arch", std::string(model::arch_name(f.model().spec.arch))},
      {"threads", threads}, {"n_prompt", a.n_prompt}, {"n_gen", a.n_gen}, {"tok_per_s_runs", runs},
      {"tok_per_s", best_tps}, {"weight_bytes_per_token", per_token}, {"achieved_read_gb_s", achieved},
      {"ceiling_read_gb_s", ceiling}, {"fraction_of_ceiling", achieved / ceiling},
  };
  fmt::print("decode: {:.2f} tok/s | {} of weights per token -> {:.2f} GB/s | host read ceiling {:.2f} GB/s | "
             "{:.0f}% of roofline\n",
             best_tps, format_bytes(per_token), achieved, ceiling, 100 * achieved / ceiling);
  if (!a.json_out.empty()) {
    std::ofstream out(a.json_out);
    out << j.dump(2) << "\n";
    if (!out) {
      log::error("{}: cannot write", a.json_out);
      return 1;
    }
  }
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "Benchmarks against ceilings measured in the same run (JSON results)");
  sub->require_subcommand(1);
  auto a = std::make_shared<BenchDecodeArgs>();
  auto* dec = sub->add_subcommand("decode", "CPU decode speed vs the host memory read ceiling");
  a->m.add_to(dec);
  dec->add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens before decoding")->capture_default_str();
  dec->add_option("-n,--n-gen", a->n_gen, "Tokens to decode per run")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  dec->add_option("-r,--reps", a->reps, "Runs (the best counts)")->capture_default_str()->check(CLI::Range(1, 100));
  dec->add_option("--json", a->json_out, "Write the result as JSON to this file");
  return {sub, [a] { return run_bench_decode(*a); }};
}

}  // namespace strata::cli
