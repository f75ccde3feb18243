// ModelSpec: everything the forward pass needs to know about a model's math, architecture-neutral,
// built once from GGUF metadata by the per-architecture rules in model_spec.cpp. Per-layer
// attributes have accessors (is_swa(il), rope_base(il)) so the forward pass never branches on the
// architecture name for a number.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kv_ring.h"

#include "core/status.h"
#include "model/arch.h"
#include "model/gguf_file.h"

namespace strata::model {

enum class RopeStyle {
  interleaved,  // rotate pairs (x[2i], x[2i+1]): llama
  neox,         // rotate halves (x[i], x[i + d/2]): gemma3, qwen3
};
enum class FfnActivation { silu, gelu_tanh };

struct ModelSpec {
  Arch arch = Arch::llama;
  HParams hp;
  RopeStyle rope_style = RopeStyle::interleaved;
  FfnActivation activation = FfnActivation::silu;
  bool qk_norm = false;          // RMSNorm of each q and k head before RoPE
  bool post_norms = false;       // gemma: norms after attention and FFN outputs too
  float embedding_scale = 1.0f;  // gemma: sqrt(n_embd)
  float attention_scale = 0.0f;  // multiplies q.k
  std::vector<bool> swa_layers;  // per layer: sliding-window attention

  bool is_swa(uint32_t il) const { return swa_layers[il]; }
  uint32_t window(uint32_t il) const { return is_swa(il) ? hp.n_swa : 0; }
  // KV slots layer il keeps for a context of n_ctx when calls write up to `margin` (ubatch)
  // positions ahead: core/kv_ring.h.
  uint64_t kv_slots(uint32_t il, uint64_t n_ctx, uint32_t margin) const { return kv_ring_slots(window(il), n_ctx, margin); }
  float rope_base(uint32_t il) const { return is_swa(il) && arch == Arch::gemma3 ? hp.rope_freq_base_swa : hp.rope_freq_base; }
  // Positions are divided by this before RoPE (linear scaling); 1 for none. gemma3 scales only
  // its global layers.
  float rope_linear_scale(uint32_t il) const {
    return is_swa(il) && arch == Arch::gemma3 ? 1.0f : hp.rope_scale_linear;
  }
  uint32_t q_width() const { return hp.n_head * hp.n_embd_head; }
  uint32_t kv_width() const { return hp.n_head_kv * hp.n_embd_head; }
  std::string summary() const;  // one line for logs
};

// Largest vocabulary a model may claim (real ones: <= ~260k). Buffers are sized from it (logits,
// the embedding row lookup), so a claim beyond it is an error, not an allocation.
inline constexpr uint32_t kMaxVocab = 1u << 24;

// Reads and validates the hyperparameters of a supported architecture.
Result<ModelSpec> spec_from_gguf(const gguf::File& file);

}  // namespace strata::model
