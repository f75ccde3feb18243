// Synthetic models: complete GGUF files with deterministic seeded weights, for tests and
// benchmarks of shapes we cannot download (a gemma3-27B-shaped Q3_K_M file is ~13 GB).
//
// Weights are random but well-scaled: matrices ~ N(0, 1/fan_in) so activations stay finite
// through any depth, the embedding scaled so that logits spread over several units, norm weights
// near 1. Quantised tensors are generated straight in the quantised domain (random codes and
// scales, kernels/cpu fill_random), which is exact and fast. The output is a pure function of
// (options, seed): chunks are seeded by (tensor, chunk) index, not by thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "model/arch.h"

namespace strata::model {

struct SynthOptions {
  Arch arch = Arch::gemma3;
  std::string preset = "tiny";  // tiny | 1b | 27b
  HParams hp;                   // filled from the preset, then overridden by the caller
  // Either one type for every matrix (`type`) or a named llama.cpp-like mix (`mix`).
  GgmlType type = GgmlType::F32;
  std::string mix;  // "" | q3_k_s | q3_k_m | q3_k_l | q4_k_s | q4_k_m
  uint64_t seed = 42;
  int threads = 0;  // 0: all cores
  bool progress = true;
  bool header_only = false;  // write metadata + tensor table only (no tensor data)
};

// Fills opts.hp from (arch, preset); error for an unknown preset or a preset the arch lacks.
Status apply_preset(SynthOptions& opts);
// Checks the hyperparameters (non-zero dims, head counts dividing, vocab large enough for the
// generated tokenizer, ...).
Status validate(const HParams& hp, Arch arch);

// The type each tensor gets (mix rules, plus llama.cpp's fallback when a row length is not a
// multiple of 256 for a K type).
GgmlType synth_tensor_type(const SynthOptions& opts, TensorRole role, int layer);
std::vector<std::string> synth_mix_names();

struct SynthTensor {
  std::string name;
  TensorRole role;
  int layer;  // -1 for globals
  GgmlType type;
  std::vector<uint64_t> ne;
};
// The tensor table the model will have, in file order.
Result<std::vector<SynthTensor>> synth_tensors(const SynthOptions& opts);

struct SynthSummary {
  uint64_t file_bytes = 0;
  uint64_t n_tensors = 0;
  uint64_t n_params = 0;
  double seconds = 0;
};

// Writes the model to `path` (replaced atomically: written to path + ".partial", then renamed).
// file_bytes in the summary is the size of the complete model, also for a header-only file.
Result<SynthSummary> write_synthetic_model(const SynthOptions& opts, const std::string& path);

}  // namespace strata::model
