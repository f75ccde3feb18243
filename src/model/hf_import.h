// Import a Hugging Face checkpoint (config.json + model.safetensors, or shards listed in
// model.safetensors.index.json) as GGUF tensors and metadata: the inverse of hf_export.h, for
// gemma3, llama (and Mistral-style sliding windows) and qwen3. `strata convert` adds the tokenizer
// (tokenizer/spm_model.h, tokenizer/vocab_convert.h) and writes the file.
//
// The conversions llama.cpp's converter applies are applied here too:
//   - gemma3 RMSNorm weights: HF computes x * (1 + w); GGUF stores w + 1 (every norm, q/k norms too).
//   - llama attn_q / attn_k rows are permuted per head from rotate-half to interleaved pairs
//     (permute_rope_rows).
//   - torch shape [n_out, n_in] row-major is ggml [n_in, n_out]: the same bytes.
// What strata cannot run is refused with the config key that says so (softcaps, llama3 RoPE
// scaling, biases, a query_pre_attn_scalar strata does not derive, ...).
//
// Lifetime: the HfModel keeps the safetensors files mapped; tensor pointers live as long as it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "io/mapped_file.h"
#include "model/arch.h"
#include "model/gguf_writer.h"

namespace strata::model {

struct HfSourceTensor {
  std::string hf_name;
  TensorRole role;
  int layer;                    // -1 for globals
  GgmlType dtype;               // F32, F16 or BF16 (safetensors F32/F16/BF16)
  std::vector<uint64_t> ne;     // ggml order (ne[0] = row length)
  const uint8_t* data = nullptr;  // into a mapped shard; not necessarily aligned
};

struct HfModel {
  std::string dir;
  Arch arch = Arch::llama;
  HParams hp;
  std::string name;  // general.name: the folder's name
  std::vector<std::shared_ptr<io::MappedFile>> shards;
  std::vector<HfSourceTensor> tensors;  // GGUF file order (globals, then layer by layer)
  uint32_t n_unused = 0;                // checkpoint tensors not imported (tied lm_head copies, ...)
};

// Reads and validates config.json and the safetensors headers; every tensor the architecture
// needs must be present with the right shape and a float dtype.
Result<HfModel> open_hf_model(const std::string& dir);

// general.* and <arch>.* keys for the model (the GGUF keys that spec_from_gguf reads).
void set_hf_metadata(const HfModel& m, GgmlType outtype, gguf::Writer& w);

struct HfImportOptions {
  GgmlType outtype = GgmlType::F16;  // matrices: F32, F16 or BF16; norms are always F32
  int threads = 0;                   // 0: all cores
  bool progress = true;
};

// Declares the tensors on `w` (after the caller set every metadata key), writes the file to
// out_path + ".partial" and renames it. Returns the file size.
Result<uint64_t> write_hf_tensors(const HfModel& m, const HfImportOptions& options, gguf::Writer& w,
                                  const std::string& out_path);

}  // namespace strata::model
