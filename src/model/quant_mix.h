// Which GGML type each tensor of a model gets: one type for every matrix, or a named llama.cpp-like
// K-quant or i-quant mix (per-tensor rules: the head and the sensitive layers' attn_v / ffn_down get more
// bits). Shared by `strata synth --mix` and `strata quantize`, so both produce the same layouts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "model/arch.h"

namespace strata::model {

// "q3_k_s" "q3_k_m" "q3_k_l" "q4_k_s" "q4_k_m" and the i-quant mixes "iq3_xxs" "iq3_xs" "iq3_m"
// "iq2_m" "iq4_xs" (table: README, "Quantisation mixes")
const std::vector<std::string>& quant_mix_names();
bool is_quant_mix(const std::string& name);

bool is_k_type(GgmlType t);
// The i-quants with 256-element super-blocks (all but IQ4_NL).
bool is_iq_super_type(GgmlType t);
// llama.cpp's choice when a K type or i-quant does not fit a row length (not a multiple of 256):
// the i-quants fall back to IQ4_NL.
GgmlType k_fallback(GgmlType t);

// The type of tensor (role, layer) with rows of `row_len` elements: norms stay F32; a tied
// embedding is treated as the output head; `mix` ("" = none) overrides `type`; a K type whose
// 256-blocks do not tile the row falls back as llama.cpp does.
GgmlType mix_tensor_type(const std::string& mix, GgmlType type, TensorRole role, int layer, const HParams& hp,
                         uint64_t row_len);

// llama.cpp's LLAMA_FTYPE number for general.file_type (informational).
uint32_t file_type_id(const std::string& mix, GgmlType type);

}  // namespace strata::model
