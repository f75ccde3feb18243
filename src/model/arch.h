// Architectures as data: which tensors a model of each architecture has, their GGUF names and
// shapes, and which block (attention, FFN, embedding, head) each belongs to. The synthetic-model
// generator, `inspect` and (later) the forward pass and planner all read this one table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::model {

enum class Arch { gemma3, llama, qwen3 };
std::optional<Arch> arch_from_name(std::string_view name);
std::string_view arch_name(Arch arch);

// Hyperparameters with GGUF/llama.cpp names.
struct HParams {
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t n_embd_head = 0;   // key_length == value_length (head_dim)
  uint32_t n_ff = 0;
  float rms_eps = 1e-6f;
  float rope_freq_base = 10000.0f;
  float rope_freq_base_swa = 10000.0f;  // gemma3 sliding layers
  float rope_scale_linear = 1.0f;       // gemma3 global layers (rope.scaling.factor)
  uint32_t n_swa = 0;                   // sliding window (0: none)
  uint32_t swa_pattern = 0;             // gemma3: layer il is global iff il % pattern == pattern - 1
  float query_pre_attn_scalar = 0;      // gemma3: attention scale 1/sqrt(this); 0 = head_dim
  bool tied_output = true;              // no output.weight: the head reuses token_embd
};

// The weight blocks of a model: per layer attention and FFN, the head, the embedding table. The one
// block vocabulary of the planner (offload/model_blocks.h), the executor and the forward pass.
enum class Block { embedding, attention, ffn, head };
// "attn 12", "ffn 12", "head", "embedding": how plans, reports, traces and errors name blocks.
std::string block_label(Block b, int layer);

enum class TensorRole {
  token_embd, output_norm, output,
  attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm, post_attention_norm,
  ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm,
};

struct TensorRoleInfo {
  TensorRole role;
  std::string_view gguf_name;  // "attn_q" -> "blk.N.attn_q.weight"; "token_embd" -> "token_embd.weight"
  bool per_layer;
  Block block;
  bool is_norm;  // 1-D, kept in f32
};
const TensorRoleInfo& role_info(TensorRole role);

// The tensors of one architecture, globals first (token_embd, output_norm, [output]), then the
// per-layer roles in GGUF order.
std::vector<TensorRole> arch_roles(Arch arch, const HParams& hp);
// ggml shape (ne[0] = row length first).
std::vector<uint64_t> role_shape(TensorRole role, const HParams& hp);
std::string tensor_name(TensorRole role, int layer);  // layer ignored for globals
// The inverse of tensor_name: "blk.3.attn_q.weight" -> (attn_q, 3), "output.weight" -> (output, -1);
// nullopt for a name outside the table (rope_freqs.weight, ...).
struct NamedRole {
  TensorRole role;
  int layer;  // -1 for globals
};
std::optional<NamedRole> role_from_tensor_name(std::string_view name);

}  // namespace strata::model
