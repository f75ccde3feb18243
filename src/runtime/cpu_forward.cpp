#include "runtime/cpu_forward.h"

#include <algorithm>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::runtime {

namespace cpu = kernels::cpu;

Result<std::unique_ptr<CpuForward>> CpuForward::create(std::shared_ptr<const Model> model, ForwardOptions opt) {
  const auto& spec = model->spec;
  if (opt.n_ctx == 0) return Status::error("context length must be positive");
  if (opt.n_ctx > spec.hp.n_ctx_train && spec.hp.n_ctx_train > 0)
    return Status::error("context {} is longer than the model allows ({} tokens)", opt.n_ctx, spec.hp.n_ctx_train);
  if (opt.ubatch == 0) return Status::error("ubatch must be positive");
  std::vector<kv::LayerShape> shapes;
  for (uint32_t il = 0; il < spec.hp.n_layer; ++il) shapes.push_back({spec.kv_width(), spec.window(il)});
  auto kv = kv::KvCache::create(shapes, opt.n_ctx, opt.ubatch, opt.kv_type);
  if (!kv) return kv.status();
  return std::unique_ptr<CpuForward>(new CpuForward(std::move(model), opt, std::move(kv.value())));
}

CpuForward::CpuForward(std::shared_ptr<const Model> model, ForwardOptions options, kv::KvCache kv)
    : model_(std::move(model)), opt_(options), kv_(std::move(kv)) {
  const auto& s = model_->spec;
  const size_t n = opt_.ubatch;
  x_.resize(n * s.hp.n_embd);
  h_.resize(n * s.hp.n_embd);
  q_.resize(n * s.q_width());
  k_.resize(n * s.kv_width());
  v_.resize(n * s.kv_width());
  att_.resize(n * s.q_width());
  gate_.resize(n * s.hp.n_ff);
  up_.resize(n * s.hp.n_ff);
  pos_.resize(n);
}

Status CpuForward::eval(std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) {
  const auto& hp = model_->spec.hp;
  if (tokens.empty()) return Status::error("nothing to evaluate (empty token list)");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= hp.n_vocab)
      return Status::error("token id {} at index {} is out of range (vocabulary has {} tokens)", tokens[i], i,
                           hp.n_vocab);
  const uint32_t pos0 = n_past();
  if (uint64_t(pos0) + tokens.size() > opt_.n_ctx)
    return Status::error("context full: {} tokens already, {} more would exceed the context of {}", pos0,
                         tokens.size(), opt_.n_ctx);
  logits.resize(which == Logits::all ? tokens.size() * hp.n_vocab : which == Logits::last ? hp.n_vocab : 0);
  for (size_t done = 0; done < tokens.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(opt_.ubatch, tokens.size() - done));
    const bool last_chunk = done + n == tokens.size();
    float* out = which == Logits::all ? logits.data() + done * hp.n_vocab : logits.data();
    run_chunk(tokens.data() + done, n, pos0 + uint32_t(done),
              which == Logits::all ? Logits::all : (last_chunk ? which : Logits::none), out);
    kv_.set_n_tokens(pos0 + uint32_t(done) + n);
    done += n;
  }
  return {};
}

void CpuForward::run_chunk(const int32_t* tokens, uint32_t n, uint32_t pos0, Logits which, float* logits) {
  const auto& s = model_->spec;
  const auto& w = model_->weights;
  const int64_t d = s.hp.n_embd;
  // Embedding rows, decoded from the (possibly quantised) table and scaled (gemma: sqrt(n_embd)).
  const auto* embd = cpu::quant_kernels(w.token_embd.type);
  for (uint32_t t = 0; t < n; ++t) {
    embd->dequantize(w.token_embd.row(tokens[t]), x_.data() + t * d, d);
    if (s.embedding_scale != 1.0f) cpu::scale(x_.data() + t * d, s.embedding_scale, d);
    pos_[t] = int32_t(pos0 + t);
  }
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    attention_block(il, n, pos0);
    ffn_block(il, n);
  }
  if (which == Logits::none) return;
  // Final norm and head, only for the rows whose logits are wanted.
  const uint32_t first = which == Logits::last ? n - 1 : 0, rows = n - first;
  for (uint32_t t = first; t < n; ++t) cpu::rms_norm(x_.data() + t * d, w.output_norm, d, s.hp.rms_eps, h_.data() + (t - first) * d);
  cpu::matmul(w.output, h_.data(), rows, logits);
}

void CpuForward::attention_block(uint32_t il, uint32_t n, uint32_t pos0) {
  const auto& s = model_->spec;
  const auto& l = model_->weights.layers[il];
  const int64_t d = s.hp.n_embd, hd = s.hp.n_embd_head;
  const float eps = s.hp.rms_eps;
  for (uint32_t t = 0; t < n; ++t) cpu::rms_norm(x_.data() + t * d, l.attn_norm, d, eps, h_.data() + t * d);
  cpu::matmul(l.wq, h_.data(), n, q_.data());
  cpu::matmul(l.wk, h_.data(), n, k_.data());
  cpu::matmul(l.wv, h_.data(), n, v_.data());
  if (s.qk_norm) {
    cpu::rms_norm_rows(q_.data(), l.q_norm, int64_t(n) * s.hp.n_head, hd, eps);
    cpu::rms_norm_rows(k_.data(), l.k_norm, int64_t(n) * s.hp.n_head_kv, hd, eps);
  }
  const bool neox = s.rope_style == model::RopeStyle::neox;
  const float base = s.rope_base(il), lin = s.rope_linear_scale(il);
  for (uint32_t t = 0; t < n; ++t) {
    const float p = float(pos0 + t) / lin;
    for (uint32_t h = 0; h < s.hp.n_head; ++h)
      cpu::rope(q_.data() + (int64_t(t) * s.hp.n_head + h) * hd, hd, p, base, model_->weights.rope_freqs, neox);
    for (uint32_t h = 0; h < s.hp.n_head_kv; ++h)
      cpu::rope(k_.data() + (int64_t(t) * s.hp.n_head_kv + h) * hd, hd, p, base, model_->weights.rope_freqs, neox);
    kv_.write(il, pos0 + t, k_.data() + int64_t(t) * s.kv_width(), v_.data() + int64_t(t) * s.kv_width());
  }
  const cpu::AttentionShape shape{s.hp.n_head, s.hp.n_head_kv, hd, s.window(il), s.attention_scale};
  cpu::attention(q_.data(), pos_.data(), n, kv_.view(il), shape, att_.data());
  cpu::matmul(l.wo, att_.data(), n, h_.data());
  if (s.post_norms) cpu::rms_norm_rows(h_.data(), l.post_attn_norm, n, d, eps);
  cpu::add(x_.data(), h_.data(), int64_t(n) * d);
}

void CpuForward::ffn_block(uint32_t il, uint32_t n) {
  const auto& s = model_->spec;
  const auto& l = model_->weights.layers[il];
  const int64_t d = s.hp.n_embd, ff = s.hp.n_ff;
  const float eps = s.hp.rms_eps;
  for (uint32_t t = 0; t < n; ++t) cpu::rms_norm(x_.data() + t * d, l.ffn_norm, d, eps, h_.data() + t * d);
  cpu::matmul(l.ffn_gate, h_.data(), n, gate_.data());
  cpu::matmul(l.ffn_up, h_.data(), n, up_.data());
  if (s.activation == model::FfnActivation::gelu_tanh)
    cpu::gelu_tanh_mul(gate_.data(), up_.data(), int64_t(n) * ff);
  else
    cpu::silu_mul(gate_.data(), up_.data(), int64_t(n) * ff);
  cpu::matmul(l.ffn_down, gate_.data(), n, h_.data());
  if (s.post_norms) cpu::rms_norm_rows(h_.data(), l.post_ffw_norm, n, d, eps);
  cpu::add(x_.data(), h_.data(), int64_t(n) * d);
}

}  // namespace strata::runtime
