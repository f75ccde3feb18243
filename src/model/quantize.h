// `strata quantize`: re-encodes the matrices of a GGUF model to another GGML type (or a llama.cpp-like
// K-quant mix) with the CPU reference quantisers; metadata (tokenizer included) is copied, with
// general.file_type updated. Norms and tensors outside the architecture table are copied as they are.
//
// Each tensor is decoded to f32 and re-encoded chunk by chunk (bounded memory) on a oneTBB arena;
// the output is written to path + ".partial" and renamed when complete. The result is a pure
// function of (input, target): chunks are independent and the quantisers deterministic.
#pragma once

#include <cstdint>
#include <string>

#include "core/ggml_type.h"
#include "core/status.h"

namespace strata::model {

struct QuantizeTarget {
  std::string name;  // as given: "q4_k", "q4_k_m"
  GgmlType type = GgmlType::F32;
  std::string mix;   // "" or a quant_mix_names() entry
};

// Parses "q8_0", "Q4_K", "q3_k_m", ...; error lists what exists.
Result<QuantizeTarget> parse_quantize_target(const std::string& name);

struct QuantizeOptions {
  QuantizeTarget target;
  int threads = 0;  // 0: all cores
  bool progress = true;
};

struct QuantizeSummary {
  uint64_t in_bytes = 0, out_bytes = 0;  // files
  uint32_t n_tensors = 0, n_requantized = 0, n_copied = 0;
  double seconds = 0;
};

// Errors: unreadable / invalid input, unsupported architecture, a source type strata cannot decode,
// a row length the target's block does not divide (naming the tensor), write failures.
Result<QuantizeSummary> quantize_model(const std::string& in_path, const std::string& out_path,
                                       const QuantizeOptions& options);

}  // namespace strata::model
