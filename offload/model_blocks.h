// ModelBlocks: the model as the planner sees it — per layer an attention block and an FFN block
// (bytes by GGML type, parameter count), the embedding and the head, and KV bytes per token.
// Built from the GGUF header alone (tensor data may be absent).
//
// KV element formats (bytes per element of K or V, per layer per token = 2 * n_head_kv * head_dim
// elements):
//   f16: 2 bytes.
//   q8:  int8 values + one f16 scale per group of 32        -> (32 + 2) / 32  = 1.0625 bytes (ggml Q8_0).
//   q4:  int4 values + f16 scale and f16 offset per group of 32 -> (16 + 4) / 32 = 0.625 bytes (ggml Q4_1).
// K and V may use different formats (RunShape::kv, kv_v).
// Sliding-window layers hold a ring of window + margin slots (RunShape::ring_margin: a prefill chunk
// writes all its keys before attending; speculative writes never overwrite entries a rollback still
// needs); full-attention layers hold the whole context.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "model/gguf_file.h"
#include "model/model_spec.h"

namespace strata::offload {

enum class KvDtype { f16, q8, q4, f32 };  // f32: the CPU engine's default KV (generate -ctk f32)
const char* kv_dtype_name(KvDtype d);
Result<KvDtype> kv_dtype_from_name(const std::string& s);
double kv_bytes_per_element(KvDtype d);

struct WeightBlock {
  model::Block kind = model::Block::attention;
  int layer = -1;              // -1 for head / embedding
  uint64_t bytes = 0;
  uint64_t params = 0;         // elements (FLOPs per token = 2 * params)
  std::map<GgmlType, uint64_t> bytes_by_type;
  GgmlType main_type() const;  // the type holding most bytes (sets the CPU GEMV rate)
  std::string label() const;   // "attn 12", "ffn 3", "head"
};

struct ModelBlocks {
  std::string name, arch;
  uint32_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
  uint32_t n_ctx_train = 0;
  std::vector<bool> swa;       // per layer
  std::vector<uint32_t> window;
  std::vector<WeightBlock> attention, ffn;  // per layer
  WeightBlock head;            // output (or token_embd when tied) + output_norm
  WeightBlock embedding;       // token_embd: rows gathered from the file mapping, never placed
  bool tied_head = false;

  uint64_t weight_bytes() const;  // attention + ffn + head (+ embedding when not tied)
  // K+V bytes one token adds to one layer (K in k, V in v).
  double kv_bytes_per_token(KvDtype k, KvDtype v) const {
    return double(n_head_kv) * head_dim * (kv_bytes_per_element(k) + kv_bytes_per_element(v));
  }
  double kv_bytes_per_token(KvDtype d) const { return kv_bytes_per_token(d, d); }
  // KV bytes layer `il` holds at context `ctx` (sliding: min(ctx, window + ring_margin), see
  // RunShape::ring_margin).
  uint64_t kv_layer_bytes(uint32_t il, uint64_t ctx, KvDtype k, KvDtype v, uint32_t ring_margin) const;
  uint64_t kv_layer_bytes(uint32_t il, uint64_t ctx, KvDtype d, uint32_t ring_margin) const {
    return kv_layer_bytes(il, ctx, d, d, ring_margin);
  }
  std::vector<uint32_t> full_layers() const;
};

Result<ModelBlocks> model_blocks(const gguf::File& file, const model::ModelSpec& spec);
// Opens the header only and builds the blocks.
Result<ModelBlocks> model_blocks_from_path(const std::string& path);

}  // namespace strata::offload
