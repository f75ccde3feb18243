#include "cli/prefill_figures.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"
#include "core/units.h"
#include "kernels/cuda/read_probe.h"

namespace strata::cli {

GemmCeilings measure_gemm_ceilings() {
  GemmCeilings c;
  log::info("measuring the bf16 and int8 GEMM rates...");
  if (auto g = kernels::cuda::measure_gemm_flops(8192, 3)) c.bf16_flops = *g;
  else log::warn("bf16 GEMM ceiling not measured: {}", g.message());
  if (auto g = kernels::cuda::measure_int8_gemm_ops(8192, 3)) c.int8_ops = *g;
  else log::warn("int8 GEMM ceiling not measured: {}", g.message());
  return c;
}

double weight_flops_per_token(const runtime::Model& model) {
  const auto& w = model.weights;
  auto elems = [](const kernels::WeightView& v) { return double(v.n_in) * double(v.n_out); };
  double e = elems(w.output);
  for (const auto& l : w.layers)
    e += elems(l.wq) + elems(l.wk) + elems(l.wv) + elems(l.wo) + elems(l.ffn_gate) + elems(l.ffn_up) + elems(l.ffn_down);
  return 2 * e;
}

double prompt_attention_flops(const model::ModelSpec& s, uint64_t n) {
  const double per_key = 4.0 * double(s.hp.n_head) * double(s.hp.n_embd_head);
  double keys = 0;  // visible keys summed over the prompt's queries and the layers
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    const uint64_t w = s.window(il) ? std::min<uint64_t>(s.window(il), n) : n;
    // Query p sees min(p + 1, w) keys: a triangle up to w, then w per query.
    keys += double(w) * double(w + 1) / 2 + double(n - w) * double(w);
  }
  return keys * per_key;
}

nlohmann::json prefill_json(const PrefillRun& r, const runtime::Model& m, const GemmCeilings& c) {
  const double tps = r.seconds > 0 ? double(r.n_prompt) / r.seconds : 0;
  const double w_flops = weight_flops_per_token(m) * double(r.n_prompt);
  const double a_flops = prompt_attention_flops(m.spec, r.n_prompt);
  nlohmann::json j = {{"prefill_tok_per_s", tps},
                      {"time_to_first_token_s", r.seconds},
                      {"prefill_weight_tflop", w_flops / 1e12},
                      {"prefill_attention_tflop", a_flops / 1e12},
                      {"prefill_pcie_bytes_per_token", r.n_prompt ? double(r.streamed_bytes) / double(r.n_prompt) : 0.0}};
  if (r.seconds > 0 && c.bf16_flops > 0) {
    j["prefill_fraction_of_bf16_gemm"] = (w_flops + a_flops) / r.seconds / c.bf16_flops;
    j["gemm_bf16_tflops"] = c.bf16_flops / 1e12;
  }
  if (r.seconds > 0 && c.int8_ops > 0) {
    j["prefill_fraction_of_int8_gemm"] = (w_flops + a_flops) / r.seconds / c.int8_ops;
    j["gemm_int8_tops"] = c.int8_ops / 1e12;
  }
  return j;
}

std::string prefill_line(const PrefillRun& r, const runtime::Model& m, const GemmCeilings& c) {
  const auto j = prefill_json(r, m, c);
  const double rate = (j["prefill_weight_tflop"].get<double>() + j["prefill_attention_tflop"].get<double>()) * 1e12 /
                      std::max(r.seconds, 1e-12);
  std::string s = fmt::format("prefill: {:.1f} tok/s over {} tokens, time to first token {:.2f} s = {} ({:.0f}% attention)",
                              j["prefill_tok_per_s"].get<double>(), r.n_prompt, r.seconds, format_flops(rate),
                              100 * j["prefill_attention_tflop"].get<double>() /
                                  std::max(1e-12, j["prefill_weight_tflop"].get<double>() + j["prefill_attention_tflop"].get<double>()));
  if (j.contains("prefill_fraction_of_bf16_gemm"))
    s += fmt::format(" | {:.0f}% of bf16 GEMM {}", 100 * j["prefill_fraction_of_bf16_gemm"].get<double>(),
                     format_flops(c.bf16_flops));
  if (j.contains("prefill_fraction_of_int8_gemm")) {
    std::string ops = format_flops(c.int8_ops);  // "... TFLOP/s" -> "... TOP/s": integer operations
    ops.replace(ops.find("FLOP"), 4, "OP");
    s += fmt::format(", {:.0f}% of int8 GEMM {}", 100 * j["prefill_fraction_of_int8_gemm"].get<double>(), ops);
  }
  if (r.streamed_bytes) s += fmt::format(" | PCIe {} per prompt token", format_bytes(r.streamed_bytes / std::max<uint64_t>(1, r.n_prompt)));
  return s;
}

}  // namespace strata::cli
