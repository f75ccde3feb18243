#include "cli/model_args.h"

#include <charconv>
#include <map>

#include "cli/output_file.h"
#include "core/log.h"
#include "offload/cost_model.h"
#include "offload/executor_plan.h"

namespace strata::cli {

CLI::Option* ModelArgs::add_spec_to(CLI::App* sub, bool default_by_plan) {
  std::string help =
      "Self-speculative decoding: none | early:d=N (layers [0,N) draft; early:d=N,tree=B: token trees of up "
      "to B children per node, greedy or sampled; CPU engine, and CUDA with f16/q8_0/q4_1 KV) | subset[:skip=R] (draft "
      "with middle layers skipped, skip set chosen online; R fixes the skipped fraction) | shadow[:TYPE] (draft with every "
      "layer from low-bit copies of its matrices, made at start-up; TYPE default q2_k; CPU engine) | lookup (n-gram in prompt "
      "and history) | auto (all three, adaptive draft length, plain steps where drafts lose)";
  if (default_by_plan)
    help += ". Default: auto where the plan predicts a gain for free drafts at acceptance 0.3 (where a verify pass of "
            "a few rows costs little more than a plain step: the GPU), else none; the spec: line on stderr says "
            "which and why";
  auto* opt = sub->add_option("--spec", spec, help);
  if (default_by_plan) opt->default_str("auto if it pays");
  else opt->capture_default_str();
  sub->add_option("--draft-max", draft_max, "Most tokens drafted per verify pass (1..15)")->capture_default_str();
  add_draft_window_option(sub, draft_window);
  return opt;
}

void add_draft_window_option(CLI::App* sub, std::string& text) {
  sub->add_option("--draft-window", text,
                  "Attention window of the self-drafters (early, subset, shadow, their trees) on full-attention layers: "
                  "SINKS,RECENT (the first SINKS and the last RECENT positions, RECENT >= 16), auto (none below a "
                  "context of 32768, then 64,4096; CPU engine only for now) or off. A draft step's cost then stops growing with the context; "
                  "rounds drafted through it are verified from layer 0 with full attention, so the text does not "
                  "change (acceptance may drop a little)")
      ->capture_default_str();
}

void ModelArgs::add_to(CLI::App* sub) {
  sub->add_option("-m,--model", model, "GGUF model file")->required();
  sub->add_option("-c,--ctx-size", n_ctx, "Context length in tokens (default: enough for the job, at most 4096 "
                                          "unless asked, never more than the model allows)");
  sub->add_option("-t,--threads", threads, "CPU threads (default: all cores)");
  sub->add_option("-b,--ubatch", ubatch,
                  "Tokens per prefill chunk, or auto: on the GPU the largest of 4096 / 2048 / 1024 that fits beside "
                  "the weights (larger chunks reach a larger share of the tensor cores), 512 under --vram and on "
                  "the CPU")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "0"}}))
      ->check(CLI::Range(0, 65536))
      ->default_str("auto");
  sub->add_option("--cpu-matmul", cpu_matmul,
                  "How the CPU multiplies: exact (f32 activations, the reference), int8 (decode and verification "
                  "rows with int8-rounded activations for q4_0..q8_0, q2_K..q6_K and the i-quants: "
                  "faster, not exact, as llama.cpp's CPU backend and the GPU's kernels round them), or auto (int8)")
      ->capture_default_str();
  sub->add_option("--device", device, "Where to run: auto (the GPU when there is one), cpu, cuda")
      ->capture_default_str();
  sub->add_option("--cache-type", cache_type,
                  "KV cache type of K and V (-ctk/-ctv set one each): f32, f16, q8 (ggml Q8_0: int8 in groups "
                  "of 32 with an f16 scale, 1.06 bytes per value) or q4 (ggml Q4_1: int4 in groups of 32 with an "
                  "f16 scale and offset, 0.63 bytes per value); quantised types need head_dim % 32 == 0. "
                  "Default f16 on the GPU, f32 on the CPU engine (the exact reference)");
  sub->add_option("--cache-type-k", cache_type_k, "KV cache type of K (-ctk), overrides --cache-type");
  sub->add_option("--cache-type-v", cache_type_v, "KV cache type of V (-ctv), overrides --cache-type");
  sub->add_option("--vram", vram, "VRAM budget, e.g. 12GiB: the planner decides which weight blocks stay "
                                  "resident and the rest are streamed from pinned host RAM (CUDA)");
  sub->add_option("--pinned", pinned, "Pinned host-RAM budget for streamed weights (default: the profile's)");
  sub->add_option("--profile", profile, "Hardware profile for planning (configs/hw/*.toml; default: this GPU "
                                        "with typical rates, PCIe measured at start-up, and the CPU too unless "
                                        "--cpu-blocks off)");
  sub->add_option("--prefetch", prefetch, "Streamed blocks in flight ahead of compute (the staging ring has "
                                          "this many + 1 slots), or auto: 1 where every streamed block is in "
                                          "pinned RAM (a double buffer keeps a PCIe-bound copy engine busy and "
                                          "leaves a slot's VRAM to weights), 2 where some are read from disk")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "0"}}))
      ->default_str("auto")
      ->check(CLI::Range(0, 16));
  add_prefill_group_option(sub, prefill_group);
  add_cpu_blocks_option(sub, cpu_blocks);
  sub->add_option("--kv-host", kv_host, "With --vram: full-attention layers whose KV lives in host RAM, attention "
                                        "computed on the CPU: none, auto (the planner decides), all, or a count N "
                                        "(the deepest N layers)")
      ->capture_default_str();
  sub->add_option("--trace", trace_path, "Write a Chrome/Perfetto trace of the run to this file (open it in "
                                         "ui.perfetto.dev): compute per weight block on the CPU or GPU, streamed "
                                         "copies, host steps. The decode step then runs without CUDA graphs.");
}

int OpenModel::open(const session::RunOptions& options, bool need_tokenizer) {
  bool bad_options = false;
  auto s = session::Session::open(options, &bad_options);
  if (!s) {
    log::error("{}", s.message());
    return bad_options ? 2 : 1;
  }
  session = std::move(*s);
  if (!need_tokenizer) return 0;
  auto t = session->tokenizer();
  if (!t) {
    log::error("{}", t.message());
    return 1;
  }
  tok = *t;
  return 0;
}

int OpenModel::open_engine(uint32_t n_ctx_hint, uint32_t n_seq, uint32_t max_auto) {
  if (Status st = session->open_engine(n_ctx_hint, n_seq, max_auto); !st) {
    log::error("{}", st.message());
    return 1;
  }
  return 0;
}

Status write_trace(const session::Session& s) {
  const auto& trace = s.trace();
  if (!trace) return {};
  STRATA_TRY(write_output_file(s.options().trace_path, trace->json()));
  log::info("trace: {} spans written to {} (open in ui.perfetto.dev){}", trace->size(), s.options().trace_path,
            trace->dropped() ? fmt::format("; {} later spans dropped (trace full)", trace->dropped()) : std::string());
  return {};
}

void add_cpu_blocks_option(CLI::App* sub, std::string& mode) {
  sub->add_option_function<std::string>(
         "--cpu-blocks", [&mode](const std::string& v) { mode = v.empty() ? "on" : v; },
         fmt::format("With --vram: weight blocks that do not fit in VRAM may stay in host RAM and be computed there "
                     "by the CPU (only activations cross PCIe) instead of streaming: auto (default: planned with and "
                     "without, the cpu tier taken where predicted at least {:.0f}% faster for the sequences that "
                     "decode together; the report's \"cpu tier:\" line says why), on (the planner may use the cpu "
                     "tier wherever it predicts a gain; the bare flag) or off",
                     100 * offload::kCpuTierMinGain))
      ->expected(0, 1)
      ->type_name("auto|on|off");
}

void add_prefill_group_option(CLI::App* sub, uint32_t& chunks) {
  const std::string now = chunks == offload::kPrefillGroupAuto ? "auto" : std::to_string(chunks);
  sub->add_option_function<std::string>(
         "--prefill-group",
         [&chunks](const std::string& v) {
           if (v == "auto") {
             chunks = offload::kPrefillGroupAuto;
             return;
           }
           uint32_t n = 0;
           const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
           if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n > offload::kMaxPrefillGroup)
             throw CLI::ValidationError("--prefill-group", fmt::format("expected auto or a chunk count in [0, {}] (got '{}')",
                                                                      offload::kMaxPrefillGroup, v));
           chunks = n;
         },
         fmt::format("With --vram: VRAM reserved for a layer-major prefill group of this many chunks before weights "
                     "are placed (each streamed block then crosses PCIe once per group of a long prompt, at the cost of "
                     "that much fewer resident weights); 0: the group takes only the VRAM the weights leave; auto: the "
                     "planner compares 0, 4, 8, 16 and {} chunks by predicted job time (prefill + generation)",
                     offload::kMaxPrefillGroup))
      ->default_str(now);
}

}  // namespace strata::cli
