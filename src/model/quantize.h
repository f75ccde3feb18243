// `strata quantize`: re-encodes the matrices of a GGUF model to another GGML type (or a llama.cpp-like
// K-quant mix) with the CPU reference quantisers; metadata (tokenizer included) is copied, with
// general.file_type updated. Norms and tensors outside the architecture table are copied as they are.
//
// Each tensor is decoded to f32 and re-encoded chunk by chunk (bounded memory) on a oneTBB arena;
// the output is written to path + ".partial" and renamed when complete. The result is a pure
// function of (input, target): chunks are independent and the quantisers deterministic.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/ggml_type.h"
#include "core/status.h"
#include "model/imatrix.h"

namespace strata::model {

struct QuantizeTarget {
  std::string name;  // as given: "q4_k", "q4_k_m"
  GgmlType type = GgmlType::F32;
  std::string mix;   // "" or a quant_mix_names() entry
};

// Parses "q8_0", "Q4_K", "q3_k_m", ... (a type name first: "iq4_xs" is the type, the mix of that
// name is "--mix iq4_xs"); error lists what exists.
Result<QuantizeTarget> parse_quantize_target(const std::string& name);
// Parses a mix name only ("q4_k_m", "iq3_xxs", ...).
Result<QuantizeTarget> parse_quantize_mix(const std::string& name);

struct QuantizeOptions {
  QuantizeTarget target;
  int threads = 0;  // 0: all cores
  bool progress = true;
  // Importance per weight (kernels/cpu/quant/iq_quant.h): used by the i-quant quantisers for the
  // tensors it has an entry for (same row length); others are quantised with uniform importance.
  std::shared_ptr<const Imatrix> imatrix;
  // Without an imatrix, the types llama.cpp refuses without one (IQ2_XXS, IQ2_XS, IQ1_S) are an
  // error unless this is set (then uniform importance, with a warning).
  bool allow_no_imatrix = false;
};

struct QuantizeSummary {
  uint64_t in_bytes = 0, out_bytes = 0;  // files
  uint32_t n_tensors = 0, n_requantized = 0, n_copied = 0;
  uint32_t n_with_imatrix = 0;  // re-encoded with an importance vector from the imatrix
  double seconds = 0;
};

// Errors: unreadable / invalid input, unsupported architecture, a source type strata cannot decode,
// a row length the target's block does not divide (naming the tensor), an imatrix entry of another
// row length than its tensor, "TYPE needs --imatrix", write failures.
Result<QuantizeSummary> quantize_model(const std::string& in_path, const std::string& out_path,
                                       const QuantizeOptions& options);

}  // namespace strata::model
