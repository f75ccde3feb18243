// Export a GGUF model as a Hugging Face checkpoint (config.json + model.safetensors, float32), so
// that HF transformers can run the very same weights as an external reference for strata's logits
// (tools/reference/). Quantised tensors are dequantised exactly; the conversions llama.cpp's
// converter applied are inverted:
//   - gemma3 RMSNorm weights: GGUF stores w + 1 (HF computes x * (1 + w)) -> export w - 1, for
//     every norm including the q/k norms.
//   - llama attn_q / attn_k: GGUF rows are permuted for the interleaved (pairs) RoPE, HF uses
//     rotate-half -> un-permute the rows of each head (see unpermute_rope_rows).
//   - ggml shape [n_in, n_out] is torch [n_out, n_in] row-major: the same bytes.
//
// The config targets transformers 5.x (rope_parameters, layer_types), with the legacy keys that
// 4.x reads where they cannot conflict with the 5.x ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/gguf_file.h"
#include "model/model_spec.h"

namespace strata::model {

enum class HfTransform {
  none,
  norm_minus_one,  // gemma: w - 1
  unpermute_rope,  // llama q/k: interleaved-pair rows -> rotate-half rows, per head
};

// One tensor of the exported checkpoint.
struct HfTensor {
  std::string hf_name;           // "model.layers.0.self_attn.q_proj.weight"
  const gguf::TensorInfo* src;   // the GGUF tensor it comes from (points into the File)
  std::vector<uint64_t> shape;   // torch order: [n_out, n_in] or [n]
  HfTransform transform = HfTransform::none;
  uint32_t n_head = 0;           // unpermute_rope: heads in this tensor (n_head or n_head_kv)
};

// HF's name for a GGUF role of an architecture ("model.layers.3.mlp.up_proj.weight"); the
// importer (hf_import.h) reads the same table backwards.
std::string hf_tensor_name(Arch arch, TensorRole role, int il);

// The tensors to export, in file order; errors name a missing tensor, a wrong shape, absent data or
// a type strata cannot dequantise, and refuse what HF cannot express (llama3 rope_freqs).
Result<std::vector<HfTensor>> hf_tensor_plan(const gguf::File& file, const ModelSpec& spec);

// config.json text for the architecture.
Result<std::string> hf_config_json(const gguf::File& file, const ModelSpec& spec);

// Writes out_dir/config.json and out_dir/model.safetensors (creating out_dir). Streams tensor by
// tensor through a bounded buffer; the safetensors file is written to a ".partial" name first.
Status export_hf(const gguf::File& file, const ModelSpec& spec, const std::string& out_dir);

// llama.cpp's converter reorders the rows of each head of attn_q/attn_k so that the pair
// (2i, 2i+1) holds what HF keeps at (i, i + head_dim/2). With d = head_dim, per head h:
//   gguf row h*d + 2*i + j  ==  hf row h*d + j*(d/2) + i     (i < d/2, j in {0, 1})
// unpermute: GGUF order -> HF order; permute: the inverse. rows = n_head * head_dim rows of
// row_len floats each; src and dst must not overlap.
void unpermute_rope_rows(const float* src, float* dst, uint32_t n_head, uint32_t head_dim, uint64_t row_len);
void permute_rope_rows(const float* src, float* dst, uint32_t n_head, uint32_t head_dim, uint64_t row_len);

}  // namespace strata::model
