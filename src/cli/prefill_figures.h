// What `bench decode` and `stress` measure a prefill against (M14): the GEMM ceilings of the same
// run (bf16 and int8 tensor cores), the work a prompt is (weight GEMMs and attention, counted
// apart because attention grows with the square of the prompt), its time to first token and the
// PCIe bytes it moved per prompt token.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model_spec.h"
#include "runtime/model.h"

namespace strata::cli {

struct GemmCeilings {
  double bf16_flops = 0;  // cuBLAS n^3 bf16 GEMM, f32 accumulation; 0: not measured
  double int8_ops = 0;    // cuBLAS n^3 int8 GEMM, int32 accumulation; 0: not measured
};
// Both ceilings on the GPU (about a second); zeros, with a warning, when a measurement fails.
GemmCeilings measure_gemm_ceilings();

// FLOPs of one token through the weight matrices (2 per weight element; attention left out).
double weight_flops_per_token(const runtime::Model& model);
// FLOPs of the attention of n prompt tokens at positions [0, n): Q.K^T and P.V (4 per visible
// key, head and dimension), sliding-window layers seeing at most `window` keys.
double prompt_attention_flops(const model::ModelSpec& s, uint64_t n);

struct PrefillRun {
  uint64_t n_prompt = 0;
  double seconds = 0;           // from the call to the last token's logits: the time to first token
  uint64_t streamed_bytes = 0;  // weight bytes copied host -> device during the prefill
};
// JSON fields of a prefill run: tok/s, time to first token, PCIe bytes per prompt token, FLOPs
// and the fractions of the ceilings (those measured).
nlohmann::json prefill_json(const PrefillRun& r, const runtime::Model& m, const GemmCeilings& c);
// One line for people: "prefill: 2760.8 tok/s over 4096 tokens (TTFT 1.48 s) = ... of bf16 GEMM ...".
std::string prefill_line(const PrefillRun& r, const runtime::Model& m, const GemmCeilings& c);

}  // namespace strata::cli
