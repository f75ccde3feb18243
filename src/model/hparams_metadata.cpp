#include "model/hparams_metadata.h"

#include <string>

namespace strata::model {

void set_hparams_metadata(gguf::Writer& w, Arch arch, const HParams& hp) {
  using gguf::Value;
  const std::string a(arch_name(arch));
  w.set("general.architecture", Value::string(a));
  w.set(a + ".context_length", Value::u32(hp.n_ctx_train));
  w.set(a + ".embedding_length", Value::u32(hp.n_embd));
  w.set(a + ".block_count", Value::u32(hp.n_layer));
  w.set(a + ".feed_forward_length", Value::u32(hp.n_ff));
  w.set(a + ".attention.head_count", Value::u32(hp.n_head));
  w.set(a + ".attention.head_count_kv", Value::u32(hp.n_head_kv));
  w.set(a + ".attention.key_length", Value::u32(hp.n_embd_head));
  w.set(a + ".attention.value_length", Value::u32(hp.n_embd_head));
  w.set(a + ".attention.layer_norm_rms_epsilon", Value::f32(hp.rms_eps));
  w.set(a + ".rope.freq_base", Value::f32(hp.rope_freq_base));
  if (hp.rope_scale_linear != 1.0f) {
    w.set(a + ".rope.scaling.type", Value::string("linear"));
    w.set(a + ".rope.scaling.factor", Value::f32(hp.rope_scale_linear));
  }
  if (arch == Arch::llama) {
    w.set(a + ".rope.dimension_count", Value::u32(hp.n_embd_head));
    w.set(a + ".vocab_size", Value::u32(hp.n_vocab));
    if (hp.n_swa) w.set(a + ".attention.sliding_window", Value::u32(hp.n_swa));
  }
  if (arch == Arch::gemma3) {
    w.set(a + ".attention.sliding_window", Value::u32(hp.n_swa));
    w.set(a + ".attention.sliding_window_pattern", Value::u32(hp.swa_pattern));
    w.set(a + ".rope.freq_base_swa", Value::f32(hp.rope_freq_base_swa));
  }
}

}  // namespace strata::model
