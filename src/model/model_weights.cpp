#include "model/model_weights.h"

#include <fmt/format.h>

namespace strata::model {
namespace {

class Loader {
 public:
  Loader(const gguf::File& f) : f_(f) {}

  kernels::WeightView matrix(const std::string& name, uint64_t n_in, uint64_t n_out) {
    const gguf::TensorInfo* t = tensor(name, {n_in, n_out});
    if (!t) return {};
    const auto& info = ggml_type_info(t->type);
    if (!info.has_cpu_kernels) {
      fail("{}: tensor '{}' has type {}, which strata cannot compute yet", f_.path(), name, info.name);
      return {};
    }
    return {t->data, t->type, int64_t(n_in), int64_t(n_out), ggml_row_bytes(t->type, n_in)};
  }

  const float* vector(const std::string& name, uint64_t n, bool optional = false) {
    if (optional && !f_.find_tensor(name)) return nullptr;
    const gguf::TensorInfo* t = tensor(name, {n});
    if (!t) return nullptr;
    if (t->type != GgmlType::F32) {
      fail("{}: tensor '{}' has type {}; norm and frequency vectors must be f32", f_.path(), name,
           ggml_type_info(t->type).name);
      return nullptr;
    }
    return reinterpret_cast<const float*>(t->data);
  }

  Status status() const { return status_; }

 private:
  const gguf::TensorInfo* tensor(const std::string& name, std::vector<uint64_t> shape) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) {
      fail("{}: missing tensor '{}'", f_.path(), name);
      return nullptr;
    }
    // ggml drops trailing 1-dims in some writers: compare with them stripped.
    auto ne = t->ne;
    while (ne.size() > shape.size() && ne.back() == 1) ne.pop_back();
    if (ne != shape) {
      gguf::TensorInfo want;
      want.ne = shape;
      fail("{}: tensor '{}' has shape {}, expected {}", f_.path(), name, t->shape_string(), want.shape_string());
      return nullptr;
    }
    if (!t->data) {
      fail("{}: tensor '{}' has no data in the file (header-only or truncated)", f_.path(), name);
      return nullptr;
    }
    return t;
  }

  template <typename... A>
  void fail(fmt::format_string<A...> f, A&&... a) {
    if (status_.is_ok()) status_ = Status::error(f, std::forward<A>(a)...);
  }

  const gguf::File& f_;
  Status status_;
};

}  // namespace

Result<ModelWeights> load_weights(const gguf::File& file, const ModelSpec& spec) {
  const HParams& hp = spec.hp;
  Loader ld(file);
  ModelWeights w;
  w.token_embd = ld.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  w.output_norm = ld.vector("output_norm.weight", hp.n_embd);
  w.output = hp.tied_output ? w.token_embd : ld.matrix("output.weight", hp.n_embd, hp.n_vocab);
  w.rope_freqs = ld.vector("rope_freqs.weight", hp.n_embd_head / 2, /*optional=*/true);
  w.layers.resize(hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    auto n = [il](const char* role) { return fmt::format("blk.{}.{}.weight", il, role); };
    LayerWeights& l = w.layers[il];
    l.attn_norm = ld.vector(n("attn_norm"), hp.n_embd);
    l.wq = ld.matrix(n("attn_q"), hp.n_embd, spec.q_width());
    l.wk = ld.matrix(n("attn_k"), hp.n_embd, spec.kv_width());
    l.wv = ld.matrix(n("attn_v"), hp.n_embd, spec.kv_width());
    l.wo = ld.matrix(n("attn_output"), spec.q_width(), hp.n_embd);
    if (spec.qk_norm) {
      l.q_norm = ld.vector(n("attn_q_norm"), hp.n_embd_head);
      l.k_norm = ld.vector(n("attn_k_norm"), hp.n_embd_head);
    }
    l.ffn_norm = ld.vector(n("ffn_norm"), hp.n_embd);
    l.ffn_gate = ld.matrix(n("ffn_gate"), hp.n_embd, hp.n_ff);
    l.ffn_up = ld.matrix(n("ffn_up"), hp.n_embd, hp.n_ff);
    l.ffn_down = ld.matrix(n("ffn_down"), hp.n_ff, hp.n_embd);
    if (spec.post_norms) {
      l.post_attn_norm = ld.vector(n("post_attention_norm"), hp.n_embd);
      l.post_ffw_norm = ld.vector(n("post_ffw_norm"), hp.n_embd);
    }
    if (!ld.status().is_ok()) break;
  }
  if (!ld.status().is_ok()) return ld.status();
  return w;
}

std::span<const LayerTensor> layer_tensors() {
  using L = LayerWeights;
  using R = TensorRole;
  static constexpr LayerTensor kTable[] = {
      {R::attn_norm, nullptr, &L::attn_norm},
      {R::attn_q, &L::wq, nullptr},
      {R::attn_k, &L::wk, nullptr},
      {R::attn_v, &L::wv, nullptr},
      {R::attn_output, &L::wo, nullptr},
      {R::attn_q_norm, nullptr, &L::q_norm},
      {R::attn_k_norm, nullptr, &L::k_norm},
      {R::post_attention_norm, nullptr, &L::post_attn_norm},
      {R::ffn_norm, nullptr, &L::ffn_norm},
      {R::ffn_gate, &L::ffn_gate, nullptr},
      {R::ffn_up, &L::ffn_up, nullptr},
      {R::ffn_down, &L::ffn_down, nullptr},
      {R::post_ffw_norm, nullptr, &L::post_ffw_norm},
  };
  return kTable;
}

}  // namespace strata::model
