// strata bench: performance figures against ceilings measured in the same run, as JSON.
//   strata bench decode -m M.gguf: decode tok/s and the weight bytes it reads per token, against
//   the roofline measured in the same run (decode at batch 1 is bound by reading the weights: host
//   memory on the CPU; device memory and, for streamed blocks, PCIe on the GPU); prefill tok/s.
//   --batch N adds the aggregate decode rate of N sessions stepping together (Engine::eval_batch:
//   one sweep over the weights per step for all N) against the one session's.
//   --compare old.json prints every figure old -> new (cli/bench_compare.h).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>
#include <tbb/global_control.h>

#include "cli/bench_compare.h"
#include "cli/bench_kernels.h"
#include "cli/bench_kv_quality.h"
#include "cli/command.h"
#include "cli/model_args.h"
#include "cli/prefill_figures.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/units.h"
#include "kernels/cpu/gemm_rate.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/memory_bandwidth.h"
#include "kernels/cuda/read_probe.h"
#include "offload/disk_probe.h"
#include "runtime/sampler.h"

namespace strata::cli {
namespace {

struct BenchDecodeArgs {
  ModelArgs m;
  uint32_t n_prompt = 16;
  uint32_t n_gen = 64;
  std::string json_out;
  int reps = 3;
  uint32_t batch = 1;
  BenchCompare compare;
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

// What bounds one decode step, measured in this run: on the CPU the host read; on the GPU the
// device read of the resident weights overlapped with the PCIe copy of the streamed ones.
struct Roofline {
  std::string what;
  double seconds_per_token = 0;
  nlohmann::json ceilings;
};

Result<Roofline> measure_roofline(const session::Session& m, const runtime::Engine& f, uint64_t per_token, int threads) {
  Roofline r;
  if (f.device_name() != "cuda") {
    const uint64_t probe = std::clamp<uint64_t>(4 * per_token, kGiB, 8 * kGiB);
    log::info("measuring host read bandwidth ({} buffer, {} threads)...", format_bytes(probe), threads);
    const double host = kernels::cpu::measure_read_bandwidth(probe, 5) * 1e9;  // GB/s -> bytes/s
    r.what = fmt::format("host read {:.2f} GB/s", host / 1e9);
    r.seconds_per_token = double(per_token) / host;
    r.ceilings = {{"host_read_gb_s", host / 1e9}};
    return r;
  }
  log::info("measuring device read and pinned H2D bandwidth...");
  auto dev = kernels::cuda::measure_read_bandwidth(size_t(2) * kGiB, 5);
  if (!dev) return dev.status();
  uint64_t streamed = 0, from_disk = 0;  // per token: over PCIe in all, and read from the disk first
  if (m.executor_plan()) {
    const auto& e = *m.executor_plan();
    const auto& pl = e.plan.placement;
    auto add = [&](offload::Tier t, uint64_t bytes) {
      // cpu-tier blocks never cross PCIe (their compute time is not part of this roofline).
      if (t == offload::Tier::stream || t == offload::Tier::disk) streamed += bytes;
      if (t == offload::Tier::disk) from_disk += bytes;
    };
    for (uint32_t il = 0; il < e.blocks.n_layer; ++il) {
      add(pl.attention[il], e.blocks.attention[il].bytes);
      add(pl.ffn[il], e.blocks.ffn[il].bytes);
    }
    add(pl.head, e.blocks.head.bytes);
  }
  double disk = 0;
  if (from_disk) {
    // The disk ceiling of this run: the reader the disk tier uses, at its queue depth, on the
    // model's own filesystem.
    const std::string dir = std::filesystem::absolute(m.options().model).parent_path().string();
    log::info("measuring disk read bandwidth in {}...", dir);
    offload::DiskProbeOptions o;
    o.dir = dir;
    o.file_bytes = 2ull << 30;
    o.queue_depths = {8};
    auto d = offload::probe_disk(o);
    if (!d) return d.status();
    disk = d->points.at(0).gbps * 1e9;
  }
  double h2d = 0;
  if (streamed) {
    auto h = kernels::cuda::measure_h2d_bandwidth(size_t(64) << 20, size_t(2) * kGiB, 3);
    if (!h) return h.status();
    h2d = *h;
  }
  const uint64_t resident = per_token > streamed ? per_token - streamed : 0;
  const double t_dev = double(resident) / *dev, t_pcie = streamed ? double(streamed) / h2d : 0.0;
  const double t_disk = from_disk ? double(from_disk) / disk : 0.0;
  r.seconds_per_token = std::max({t_dev, t_pcie, t_disk});
  r.what = streamed ? fmt::format("max({} resident at {:.0f} GB/s, {} streamed at {:.1f} GB/s{})", format_bytes(resident),
                                  *dev / 1e9, format_bytes(streamed), h2d / 1e9,
                                  from_disk ? fmt::format(", {} of it from disk at {:.2f} GB/s", format_bytes(from_disk),
                                                          disk / 1e9)
                                            : std::string())
                    : fmt::format("device read {:.0f} GB/s", *dev / 1e9);
  r.ceilings = {{"device_read_gb_s", *dev / 1e9}, {"h2d_pinned_gb_s", h2d / 1e9}, {"resident_bytes_per_token", resident},
                {"streamed_bytes_per_token", streamed}};
  if (from_disk) {
    r.ceilings["disk_read_gb_s"] = disk / 1e9;
    r.ceilings["disk_bytes_per_token"] = from_disk;
  }
  return r;
}

// N sessions, each prefilled with its own prompt, then decoding together: aggregate tokens/s of
// the batched steps (the best of `reps`).
Result<std::vector<double>> bench_batched(runtime::Engine& f, uint32_t n_prompt, uint32_t n_gen, int reps) {
  const uint32_t n = f.n_seq(), n_vocab = f.model().spec.hp.n_vocab;
  Rng rng(2);
  std::vector<std::vector<int32_t>> prompts(n, std::vector<int32_t>(std::max<uint32_t>(1, n_prompt)));
  for (auto& p : prompts)
    for (auto& t : p) t = int32_t(rng.next_u32() % n_vocab);
  std::vector<double> runs;
  std::vector<runtime::BatchRow> rows(n);
  std::vector<float> logits, all;
  for (int r = 0; r < reps; ++r) {
    for (uint32_t s = 0; s < n; ++s) {
      f.truncate(s, 0);
      STRATA_TRY(f.eval(s, prompts[s], runtime::Logits::last, logits));
      rows[s] = {s, runtime::argmax(logits)};
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < n_gen; ++i) {
      for (uint32_t r0 = 0; r0 < n; r0 += runtime::kMaxExactRows) {
        const uint32_t nr = std::min(runtime::kMaxExactRows, n - r0);
        STRATA_TRY(f.eval_batch(std::span(rows).subspan(r0, nr), all));
        for (uint32_t k = 0; k < nr; ++k)
          rows[r0 + k].token = runtime::argmax(std::span<const float>(all).subspan(size_t(k) * n_vocab, n_vocab));
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    runs.push_back(double(n) * n_gen / s);
  }
  return runs;
}

int run_bench_decode(BenchDecodeArgs& a) {
  const auto limit = a.m.thread_limit();
  const int threads = a.m.threads > 0 ? a.m.threads
                                      : int(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  if (Status s = a.compare.load("decode"); !s) {
    log::error("{}", s.message());
    return 2;
  }
  OpenModel om;
  if (int rc = om.open(a.m, false)) return rc;
  if (int rc = om.open_engine(a.n_prompt + a.n_gen + 1, a.batch)) return rc;
  auto& ses = *om.session;
  auto& f = ses.engine();
  ses.report_plan();
  const uint64_t per_token = weight_bytes_per_token(f.model());
  auto roof = measure_roofline(ses, f, per_token, threads);
  if (!roof) {
    log::error("{}", roof.message());
    return 1;
  }
  const bool gpu = f.device_name() == "cuda";
  // The prefill ceilings: bf16 and int8 GEMM on the GPU; on the CPU, f32 SGEMM on every worker (the
  // CPU prefill path is dequantised tiles times SGEMM, kernels/cpu/matmul.h).
  GemmCeilings gemm;
  if (gpu && a.n_prompt >= 256) gemm = measure_gemm_ceilings();
  double sgemm_flops = 0;
  if (!gpu && a.n_prompt >= uint32_t(kernels::cpu::kGemmMinTokens)) {
    log::info("measuring the f32 SGEMM rate ({} threads)...", threads);
    sgemm_flops = kernels::cpu::measure_sgemm_flops(512, 3);
  }

  Rng rng(1);
  std::vector<int32_t> prompt(a.n_prompt);
  for (auto& t : prompt) t = int32_t(rng.next_u32() % f.model().spec.hp.n_vocab);
  double best_tps = 0, h2d_gbps = 0, disk_gbps = 0, host_ms_per_token = 0;
  PrefillRun best_prefill;  // the fastest of the reps
  // Host-tier work (cpu-tier blocks, host-KV attention): CPU seconds inside decode steps.
  auto host_s = [&] { return f.host_compute_seconds(); };
  std::vector<double> runs;
  for (int r = 0; r < a.reps; ++r) {
    f.truncate(0);
    std::vector<float> logits;
    const auto tp = std::chrono::steady_clock::now();
    const uint64_t streamed_pp = f.streamed_bytes();
    if (Status s = f.eval(prompt, runtime::Logits::last, logits); !s) {
      log::error("{}", s.message());
      return 1;
    }
    const PrefillRun pr{a.n_prompt, std::chrono::duration<double>(std::chrono::steady_clock::now() - tp).count(),
                        f.streamed_bytes() - streamed_pp};
    if (best_prefill.seconds == 0 || pr.seconds < best_prefill.seconds) best_prefill = pr;
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t streamed0 = f.streamed_bytes(), disk0 = f.disk_bytes();
    const double host0 = host_s();
    for (uint32_t i = 0; i < a.n_gen; ++i) {
      // The engine's argmax where it took one with the logits (the CPU engine's head), as generate's
      // greedy sampler does.
      const int32_t next = f.last_argmax() >= 0 ? f.last_argmax() : runtime::argmax(logits);
      if (Status s = f.eval(std::span(&next, 1), runtime::Logits::last, logits); !s) {
        log::error("{}", s.message());
        return 1;
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    runs.push_back(a.n_gen / s);
    if (a.n_gen / s > best_tps) {
      h2d_gbps = double(f.streamed_bytes() - streamed0) / s / 1e9;
      disk_gbps = double(f.disk_bytes() - disk0) / s / 1e9;
      host_ms_per_token = (host_s() - host0) * 1e3 / a.n_gen;
    }
    best_tps = std::max(best_tps, a.n_gen / s);
  }
  std::vector<double> batch_runs;
  if (a.batch > 1) {
    auto b = bench_batched(f, a.n_prompt, a.n_gen, a.reps);
    if (!b) {
      log::error("{}", b.message());
      return 1;
    }
    batch_runs = std::move(b.value());
  }
  const double roof_tps = 1.0 / roof->seconds_per_token;
  const double best_pp = best_prefill.seconds > 0 ? a.n_prompt / best_prefill.seconds : 0;
  const double pp_flops = best_pp * weight_flops_per_token(f.model());
  nlohmann::json j = {
      {"bench", "decode"}, {"model", a.m.model}, {"arch", std::string(model::arch_name(f.model().spec.arch))},
      {"device", std::string(f.device_name())}, {"threads", threads}, {"n_prompt", a.n_prompt}, {"n_gen", a.n_gen},
      {"tok_per_s_runs", runs}, {"tok_per_s", best_tps}, {"weight_bytes_per_token", per_token},
      {"achieved_read_gb_s", best_tps * double(per_token) / 1e9}, {"ceilings", roof->ceilings},
      {"roofline_tok_per_s", roof_tps}, {"fraction_of_roofline", best_tps / roof_tps},
      {"prefill_tok_per_s", best_pp}, {"prefill_tflops", pp_flops / 1e12},
      {"vram_peak_bytes", f.vram_peak_bytes()},
  };
  j["batch"] = a.batch;
  // How the CPU multiplied decode rows (the CPU engine, cpu-tier blocks): int8 by default since
  // session 30, exact before, so results from either side of that change say which they are.
  const auto cpu_int8 = a.m.cpu_int8();  // the engine opened with it: a bad name failed there
  const bool int8 = cpu_int8 && *cpu_int8;
  j["cpu_matmul"] = int8 ? "int8" : "exact";
  if (!batch_runs.empty()) {
    const double best = *std::max_element(batch_runs.begin(), batch_runs.end());
    j["batch_tok_per_s_runs"] = batch_runs;
    j["batch_tok_per_s"] = best;  // all sessions together
    j["batch_tok_per_s_per_session"] = best / a.batch;
    j["batch_speedup"] = best_tps > 0 ? best / best_tps : 0.0;
    j["batch_kv_bytes_per_session"] = f.kv_bytes_per_seq();
  }
  j.update(prefill_json(best_prefill, f.model(), gemm));
  if (gemm.bf16_flops > 0) {
    j["ceilings"]["gemm_bf16_tflops"] = gemm.bf16_flops / 1e12;
    j["prefill_fraction_of_gemm"] = pp_flops / gemm.bf16_flops;  // weight GEMMs alone (earlier results' figure)
  }
  if (gemm.int8_ops > 0) j["ceilings"]["gemm_int8_tops"] = gemm.int8_ops / 1e12;
  if (sgemm_flops > 0) {
    j["ceilings"]["sgemm_f32_gflops"] = sgemm_flops / 1e9;
    j["prefill_fraction_of_sgemm"] = pp_flops / sgemm_flops;
  }
  if (h2d_gbps > 0) {
    j["achieved_h2d_gb_s"] = h2d_gbps;
    if (roof->ceilings.contains("h2d_pinned_gb_s") && roof->ceilings["h2d_pinned_gb_s"].get<double>() > 0)
      j["h2d_fraction_of_pinned"] = h2d_gbps / roof->ceilings["h2d_pinned_gb_s"].get<double>();
  }
  if (host_ms_per_token > 0) {
    j["cpu_compute_ms_per_token"] = host_ms_per_token;
    fmt::print("host tiers: {:.2f} ms of CPU compute per decode step ({:.0f}% of the step)\n", host_ms_per_token,
               best_tps > 0 ? 100 * host_ms_per_token / (1e3 / best_tps) : 0.0);
  }
  if (disk_gbps > 0) {
    j["achieved_disk_gb_s"] = disk_gbps;
    if (roof->ceilings.contains("disk_read_gb_s"))
      j["disk_fraction_of_probe"] = disk_gbps / roof->ceilings["disk_read_gb_s"].get<double>();
    fmt::print("disk tier: {:.2f} GB/s read during decode ({:.0f}% of the {:.2f} GB/s measured here)\n", disk_gbps,
               100 * disk_gbps / roof->ceilings["disk_read_gb_s"].get<double>(), roof->ceilings["disk_read_gb_s"].get<double>());
  }
  if (const auto& plan = ses.executor_plan()) {
    const auto& p = plan->plan.prediction;
    j["predicted_tok_per_s"] = p.decode_tps;
    j["predicted_prefill_tok_per_s"] = p.prefill_tps;
    j["prefill_group_chunks"] = plan->plan.prefill_group;  // planned (STRATA_PREFILL_GROUP=0: chunk-major)
    j["fraction_of_prediction"] = p.decode_tps > 0 ? best_tps / p.decode_tps : 0.0;
    j["vram_budget_bytes"] = plan->budgets.vram;
    // Where the host-side tiers put things (compare runs with --kv-host none / all, --cpu-blocks).
    const auto& pl = plan->plan.placement;
    j["kv_host"] = a.m.kv_host;
    j["kv_host_layers"] = pl.n_kv_host();
    j["host_kv_bytes"] = plan->plan.usage.host_kv;
    j["cpu_blocks"] = uint64_t(std::count(pl.attention.begin(), pl.attention.end(), offload::Tier::cpu) +
                               std::count(pl.ffn.begin(), pl.ffn.end(), offload::Tier::cpu) +
                               (pl.head == offload::Tier::cpu ? 1 : 0));
  }
  fmt::print("decode: {:.2f} tok/s | {} of weights per token | roofline {:.2f} tok/s ({}) | {:.0f}% of roofline{}\n",
             best_tps, format_bytes(per_token), roof_tps, roof->what, 100 * best_tps / roof_tps,
             gpu ? "" : fmt::format(" | {} activations (--cpu-matmul {})",
                                    int8 ? "int8" : "f32", a.m.cpu_matmul));
  if (sgemm_flops > 0)
    fmt::print("prefill: {:.1f} tok/s over {} tokens = {} ({:.0f}% of f32 SGEMM {} on {} thread{})\n", best_pp, a.n_prompt,
               format_flops(pp_flops), 100 * pp_flops / sgemm_flops, format_flops(sgemm_flops), threads,
               threads == 1 ? "" : "s");
  else
    fmt::print("{}\n", prefill_line(best_prefill, f.model(), gemm));
  if (!batch_runs.empty())
    fmt::print("batch {}: {:.2f} tok/s in all ({:.2f} per session) = x{:.2f} the one session's {:.2f} tok/s\n", a.batch,
               j["batch_tok_per_s"].get<double>(), j["batch_tok_per_s_per_session"].get<double>(),
               j["batch_speedup"].get<double>(), best_tps);
  if (ses.executor_plan()) ses.report_measured(best_tps, uint64_t(h2d_gbps * 1e9), 1.0);
  if (int rc = finish_bench(j, a.json_out, a.compare); rc != 0) return rc;
  if (Status s = write_trace(ses); !s) {
    log::error("{}", s.message());
    return 1;
  }
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "Benchmarks against ceilings measured in the same run (JSON results)");
  sub->require_subcommand(1);
  auto a = std::make_shared<BenchDecodeArgs>();
  auto* dec = sub->add_subcommand("decode", "Prefill and decode speed vs ceilings measured in the same run (host "
                                            "read and f32 SGEMM on the CPU; device read, PCIe and GEMM on the GPU)");
  a->m.add_to(dec);
  dec->add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens before decoding")->capture_default_str();
  dec->add_option("-n,--n-gen", a->n_gen, "Tokens to decode per run")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  dec->add_option("-r,--reps", a->reps, "Runs (the best counts)")->capture_default_str()->check(CLI::Range(1, 100));
  dec->add_option("--json", a->json_out, "Write the result as JSON to this file");
  dec->add_option("--batch", a->batch, "Also decode N sessions together (one sweep over the weights per step) and "
                                       "report their aggregate tok/s against the one session's")
      ->capture_default_str()->check(CLI::Range(1u, 64u));
  a->compare.add_to(dec);
  auto kernels_run = add_bench_kernels(sub);
  auto kv_quality_run = add_bench_kv_quality(sub);
  auto spec_run = add_bench_spec(sub);
  auto cpu_kernels_run = add_bench_cpu_kernels(sub);
  return {sub, [a, dec, kernels_run, kv_quality_run, spec_run, cpu_kernels_run] {
            if (dec->parsed()) return run_bench_decode(*a);
            if (const int rc = kv_quality_run(); rc >= 0) return rc;
            if (const int rc = spec_run(); rc >= 0) return rc;
            if (const int rc = cpu_kernels_run(); rc >= 0) return rc;
            return kernels_run();
          }};
}

}  // namespace strata::cli
