#include "model/model_spec.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace strata::model {
namespace {

// Reads `<arch>.<key>` as u32; missing -> error naming the key.
struct Reader {
  const gguf::File& f;
  std::string prefix;
  Status status;

  uint32_t u32(const char* key) {
    auto v = f.get_u32(prefix + key);
    if (!v) {
      if (status.is_ok()) status = v.status();
      return 0;
    }
    return *v;
  }
  uint32_t u32(const char* key, uint32_t fallback) {
    auto v = f.get_u32(prefix + key, fallback);
    if (!v) {
      if (status.is_ok()) status = v.status();
      return fallback;
    }
    return *v;
  }
  float f32(const char* key, float fallback) {
    auto v = f.get_f32(prefix + key, fallback);
    if (!v) {
      if (status.is_ok()) status = v.status();
      return fallback;
    }
    return *v;
  }
};

}  // namespace

std::string ModelSpec::summary() const {
  uint32_t n_swa_layers = 0;
  for (bool s : swa_layers) n_swa_layers += s;
  return fmt::format("{}: {} layers ({} sliding, window {}), n_embd {}, heads {}/{} x {}, n_ff {}, vocab {}",
                     arch_name(arch), hp.n_layer, n_swa_layers, hp.n_swa, hp.n_embd, hp.n_head,
                     hp.n_head_kv, hp.n_embd_head, hp.n_ff, hp.n_vocab);
}

Result<ModelSpec> spec_from_gguf(const gguf::File& file) {
  const std::string arch_str = file.architecture();
  if (arch_str.empty()) return Status::error("{}: general.architecture is missing", file.path());
  const auto arch = arch_from_name(arch_str);
  if (!arch)
    return Status::error("{}: unsupported architecture '{}' (strata runs gemma3, llama, qwen3)", file.path(),
                         arch_str);
  ModelSpec s;
  s.arch = *arch;
  HParams& hp = s.hp;
  Reader r{file, arch_str + ".", Status::ok()};
  hp.n_embd = r.u32("embedding_length");
  hp.n_layer = r.u32("block_count");
  hp.n_ff = r.u32("feed_forward_length");
  hp.n_head = r.u32("attention.head_count");
  hp.n_head_kv = r.u32("attention.head_count_kv", hp.n_head);
  hp.n_ctx_train = r.u32("context_length");
  // head_dim comes from key_length, never from n_embd / n_head (gemma3, qwen3 differ).
  hp.n_embd_head = r.u32("attention.key_length", hp.n_head ? hp.n_embd / hp.n_head : 0);
  const uint32_t value_length = r.u32("attention.value_length", hp.n_embd_head);
  hp.rms_eps = r.f32("attention.layer_norm_rms_epsilon", 1e-6f);
  hp.rope_freq_base = r.f32("rope.freq_base", 10000.0f);
  hp.n_swa = r.u32("attention.sliding_window", 0);
  STRATA_TRY(r.status.with_context(file.path()));
  if (value_length != hp.n_embd_head)
    return Status::error("{}: key_length {} != value_length {} is not supported", file.path(), hp.n_embd_head,
                         value_length);
  if (!hp.n_embd || !hp.n_layer || !hp.n_ff || !hp.n_head || !hp.n_head_kv || !hp.n_embd_head)
    return Status::error("{}: a model dimension is zero (n_embd {}, n_layer {}, n_ff {}, n_head {}, n_head_kv {}, "
                         "head_dim {})", file.path(), hp.n_embd, hp.n_layer, hp.n_ff, hp.n_head, hp.n_head_kv,
                         hp.n_embd_head);
  if (hp.n_head % hp.n_head_kv)
    return Status::error("{}: head_count {} is not a multiple of head_count_kv {}", file.path(), hp.n_head, hp.n_head_kv);
  // q and kv widths (n_head * head_dim) are computed in 32 bits and size per-head buffers: bound
  // the head counts too, or n_head = 2^20 + 1 wraps q_width() to a small number.
  if (hp.n_layer > 4096 || hp.n_embd > (1u << 20) || hp.n_ff > (1u << 22) || hp.n_embd_head > 4096 ||
      hp.n_head > 4096 || uint64_t(hp.n_head) * hp.n_embd_head > (1u << 20))
    return Status::error("{}: implausible dimensions (n_layer {}, n_embd {}, n_ff {}, n_head {}, head_dim {})",
                         file.path(), hp.n_layer, hp.n_embd, hp.n_ff, hp.n_head, hp.n_embd_head);
  auto tokens = file.get_array("tokenizer.ggml.tokens");
  uint64_t n_vocab = r.u32("vocab_size", tokens ? uint32_t(std::min<size_t>((*tokens)->items.size(), UINT32_MAX)) : 0);
  if (const auto* embd = file.find_tensor("token_embd.weight"); embd && embd->ne.size() == 2)
    n_vocab = embd->ne[1];  // the embedding is the authority on the vocabulary size
  STRATA_TRY(r.status.with_context(file.path()));  // a vocab_size of the wrong type
  if (n_vocab > kMaxVocab)
    return Status::error("{}: vocabulary of {} tokens is beyond strata's limit of {}", file.path(), n_vocab, kMaxVocab);
  hp.n_vocab = uint32_t(n_vocab);
  hp.tied_output = file.find_tensor("output.weight") == nullptr;
  {
    auto scaling = file.get_string(arch_str + ".rope.scaling.type", "none");
    if (!scaling) return scaling.status();
    if (*scaling == "linear") hp.rope_scale_linear = r.f32("rope.scaling.factor", 1.0f);
    else if (*scaling != "none" && *scaling != "llama3")  // llama3 scaling travels as rope_freqs.weight
      return Status::error("{}: rope scaling '{}' is not supported (none, linear, llama3)", file.path(), *scaling);
    if (!(hp.rope_scale_linear > 0)) return Status::error("{}: rope.scaling.factor must be > 0", file.path());
  }

  s.swa_layers.assign(hp.n_layer, false);
  switch (s.arch) {
    case Arch::gemma3: {
      s.rope_style = RopeStyle::neox;
      s.activation = FfnActivation::gelu_tanh;
      s.qk_norm = true;
      s.post_norms = true;
      s.embedding_scale = std::sqrt(float(hp.n_embd));
      hp.rope_freq_base_swa = r.f32("rope.freq_base_swa", 10000.0f);
      hp.swa_pattern = r.u32("attention.sliding_window_pattern", 6);
      STRATA_TRY(r.status.with_context(file.path()));
      if (hp.n_swa == 0) return Status::error("{}: gemma3.attention.sliding_window is missing or 0", file.path());
      if (hp.swa_pattern == 0) return Status::error("{}: sliding_window_pattern is 0", file.path());
      // Layer il is global iff il % pattern == pattern - 1 (5 sliding : 1 global).
      for (uint32_t il = 0; il < hp.n_layer; ++il) s.swa_layers[il] = il % hp.swa_pattern != hp.swa_pattern - 1;
      // gemma3: attention scale is 1/sqrt(query_pre_attn_scalar); GGUF has no key for it. It equals
      // head_dim for every size except 27B (62 layers), where it is n_embd / n_head (= 168).
      hp.query_pre_attn_scalar = hp.n_layer == 62 ? float(hp.n_embd) / float(hp.n_head) : float(hp.n_embd_head);
      s.attention_scale = 1.0f / std::sqrt(hp.query_pre_attn_scalar);
      break;
    }
    case Arch::llama:
      s.rope_style = RopeStyle::interleaved;
      s.activation = FfnActivation::silu;
      s.attention_scale = 1.0f / std::sqrt(float(hp.n_embd_head));
      // Mistral-style sliding window applies to every layer.
      for (uint32_t il = 0; il < hp.n_layer; ++il) s.swa_layers[il] = hp.n_swa > 0;
      break;
    case Arch::qwen3:
      s.rope_style = RopeStyle::neox;
      s.activation = FfnActivation::silu;
      s.qk_norm = true;
      s.attention_scale = 1.0f / std::sqrt(float(hp.n_embd_head));
      break;
  }
  if (hp.n_vocab == 0) return Status::error("{}: vocabulary size unknown (no token_embd.weight)", file.path());
  return s;
}

}  // namespace strata::model
