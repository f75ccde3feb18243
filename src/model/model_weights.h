// Views of every weight a forward pass uses, checked against the ModelSpec: each tensor present,
// of a type strata computes, with exactly the expected shape. Shapes in comments are ggml order
// (row length first). The views point into the GGUF mapping: the File must outlive the weights.
#pragma once

#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/weight_view.h"
#include "model/gguf_file.h"
#include "model/model_spec.h"

namespace strata::model {

struct LayerWeights {
  const float* attn_norm = nullptr;       // (n_embd)
  kernels::WeightView wq;                 // (n_embd, n_head * head_dim)
  kernels::WeightView wk;                 // (n_embd, n_head_kv * head_dim)
  kernels::WeightView wv;                 // (n_embd, n_head_kv * head_dim)
  kernels::WeightView wo;                 // (n_head * head_dim, n_embd)
  const float* q_norm = nullptr;          // (head_dim) when spec.qk_norm
  const float* k_norm = nullptr;          // (head_dim) when spec.qk_norm
  const float* post_attn_norm = nullptr;  // (n_embd) when spec.post_norms
  const float* ffn_norm = nullptr;        // (n_embd)
  kernels::WeightView ffn_gate;           // (n_embd, n_ff)
  kernels::WeightView ffn_up;             // (n_embd, n_ff)
  kernels::WeightView ffn_down;           // (n_ff, n_embd)
  const float* post_ffw_norm = nullptr;   // (n_embd) when spec.post_norms
};

struct ModelWeights {
  kernels::WeightView token_embd;     // (n_embd, n_vocab)
  const float* output_norm = nullptr; // (n_embd)
  kernels::WeightView output;         // (n_embd, n_vocab): token_embd when tied
  const float* rope_freqs = nullptr;  // (head_dim / 2) optional frequency divisors (llama3 scaling)
  std::vector<LayerWeights> layers;
};

Result<ModelWeights> load_weights(const gguf::File& file, const ModelSpec& spec);

// Where each per-layer role of the architecture table (model/arch.h: role_info gives its Block)
// lives in LayerWeights: a matrix or a norm vector (the other member null). In the role table's
// order, so code that walks a layer's weights by role keeps one order: the CUDA engine assigns
// matrices to streamed blocks by role_info(role).block.
struct LayerTensor {
  TensorRole role;
  kernels::WeightView LayerWeights::*matrix;
  const float* LayerWeights::*norm;
};
std::span<const LayerTensor> layer_tensors();

}  // namespace strata::model
