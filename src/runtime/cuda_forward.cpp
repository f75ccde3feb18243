#include "runtime/cuda_forward.h"

#include <algorithm>

#include "core/half.h"
#include "core/units.h"
#include "kernels/cuda/cuda_api.h"
#include "runtime/forward_pass.h"

namespace strata::runtime {

namespace cuda = kernels::cuda;

struct CudaForward::Impl {
  cuda::Stream stream = nullptr;
  std::vector<void*> allocations;
  model::ModelWeights dev;  // the model's weights, with device pointers
  struct LayerKv { cuda::KvStoreDev store; };
  std::vector<LayerKv> kv;
  ForwardBuffers buf{};
  int32_t* d_tokens = nullptr;
  int32_t* d_pos = nullptr;
  std::vector<int32_t> host_pos;  // positions of the current chunk (ubatch entries)
  float* d_logits = nullptr;
  cuda::Workspace ws;
  Status first_error;  // the first failed kernel of the current eval (ops cannot return one)

  ~Impl() {
    for (void* p : allocations) cuda::device_free(p);
    if (stream) cuda::stream_destroy(stream);
  }
  Result<void*> alloc(size_t bytes, uint64_t& total) {
    auto p = cuda::device_alloc(std::max<size_t>(bytes, 256));
    if (!p) return p.status();
    allocations.push_back(*p);
    total += bytes;
    return p;
  }
  void check(Status s) {
    if (!s.is_ok() && first_error.is_ok()) first_error = s;
  }
};

CudaForward::CudaForward(std::shared_ptr<const Model> model, ForwardOptions options)
    : model_(std::move(model)), opt_(options), impl_(std::make_unique<Impl>()) {}

CudaForward::~CudaForward() = default;

Result<std::unique_ptr<CudaForward>> CudaForward::create(std::shared_ptr<const Model> model, ForwardOptions opt) {
  const auto& spec = model->spec;
  if (opt.n_ctx == 0 || opt.ubatch == 0) return Status::error("context and ubatch must be positive");
  if (opt.n_ctx > spec.hp.n_ctx_train && spec.hp.n_ctx_train > 0)
    return Status::error("context {} is longer than the model allows ({} tokens)", opt.n_ctx, spec.hp.n_ctx_train);
  if (opt.kv_type != GgmlType::F16 && opt.kv_type != GgmlType::F32)
    return Status::error("KV cache type {} is not supported on CUDA yet (f32, f16)", ggml_type_info(opt.kv_type).name);
  std::unique_ptr<CudaForward> f(new CudaForward(std::move(model), opt));
  STRATA_TRY(f->allocate());
  return f;
}

Status CudaForward::allocate() {
  Impl& im = *impl_;
  auto stream = cuda::stream_create();
  if (!stream) return stream.status();
  im.stream = *stream;
  const auto& s = model_->spec;
  const auto& host = model_->weights;
  uint64_t& total = device_bytes_;
  auto upload = [&](const void* src, size_t bytes) -> Result<void*> {
    auto d = im.alloc(bytes, total);
    if (!d) return Status::error("cannot allocate {} of VRAM: {}", format_bytes(bytes), d.message());
    STRATA_TRY(cuda::copy_to_device(*d, src, bytes, im.stream));
    return d;
  };
  Status err;
  auto matrix = [&](const kernels::WeightView& v) {
    kernels::WeightView d = v;
    if (v.empty() || !err.is_ok()) return d;
    auto p = upload(v.data, v.row_bytes * uint64_t(v.n_out));
    if (!p) { err = p.status(); return d; }
    d.data = static_cast<const uint8_t*>(*p);
    return d;
  };
  auto vec = [&](const float* v, size_t n) -> const float* {
    if (!v || !err.is_ok()) return nullptr;
    auto p = upload(v, n * sizeof(float));
    if (!p) { err = p.status(); return nullptr; }
    return static_cast<const float*>(*p);
  };
  const uint32_t d = s.hp.n_embd, hd = s.hp.n_embd_head;
  im.dev.token_embd = matrix(host.token_embd);
  im.dev.output = s.hp.tied_output ? im.dev.token_embd : matrix(host.output);
  im.dev.output_norm = vec(host.output_norm, d);
  im.dev.rope_freqs = vec(host.rope_freqs, hd / 2);
  im.dev.layers.resize(host.layers.size());
  for (size_t il = 0; il < host.layers.size() && err.is_ok(); ++il) {
    const auto& h = host.layers[il];
    auto& l = im.dev.layers[il];
    l.attn_norm = vec(h.attn_norm, d);
    l.wq = matrix(h.wq); l.wk = matrix(h.wk); l.wv = matrix(h.wv); l.wo = matrix(h.wo);
    l.q_norm = vec(h.q_norm, hd); l.k_norm = vec(h.k_norm, hd);
    l.post_attn_norm = vec(h.post_attn_norm, d);
    l.ffn_norm = vec(h.ffn_norm, d);
    l.ffn_gate = matrix(h.ffn_gate); l.ffn_up = matrix(h.ffn_up); l.ffn_down = matrix(h.ffn_down);
    l.post_ffw_norm = vec(h.post_ffw_norm, d);
  }
  STRATA_TRY(err);

  // KV: a ring of window + ubatch slots for sliding layers, n_ctx slots otherwise.
  const size_t elem = opt_.kv_type == GgmlType::F16 ? 2 : 4;
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    const uint32_t w = s.window(il);
    const int64_t cap = w ? std::min<int64_t>(opt_.n_ctx, int64_t(w) + opt_.ubatch) : opt_.n_ctx;
    const size_t bytes = size_t(cap) * s.kv_width() * elem;
    auto k = im.alloc(bytes, total), v = im.alloc(bytes, total);
    if (!k || !v) return Status::error("cannot allocate the KV cache of layer {} ({})", il, format_bytes(2 * bytes));
    im.kv.push_back({{*k, *v, opt_.kv_type, cap}});
  }
  // Activations for one chunk.
  const size_t n = opt_.ubatch;
  auto fbuf = [&](size_t count) -> float* {
    auto p = im.alloc(count * sizeof(float), total);
    if (!p) { err = p.status(); return nullptr; }
    return static_cast<float*>(*p);
  };
  im.buf = {fbuf(n * d), fbuf(n * d), fbuf(n * s.q_width()), fbuf(n * s.kv_width()), fbuf(n * s.kv_width()),
            fbuf(n * s.q_width()), fbuf(n * s.hp.n_ff), fbuf(n * s.hp.n_ff)};
  im.d_logits = fbuf(n * size_t(s.hp.n_vocab));
  STRATA_TRY(err);
  auto ids = im.alloc(n * sizeof(int32_t), total), pos = im.alloc(n * sizeof(int32_t), total);
  if (!ids || !pos) return Status::error("cannot allocate token buffers");
  im.d_tokens = static_cast<int32_t*>(*ids);
  im.d_pos = static_cast<int32_t*>(*pos);
  im.host_pos.resize(n);
  // Scratch: the largest need of any matmul or attention call.
  size_t ws = 0;
  for (const auto& l : im.dev.layers)
    for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      ws = std::max(ws, cuda::workspace_bytes_for_gemm(*m, int(n)));
  ws = std::max(ws, cuda::workspace_bytes_for_gemm(im.dev.output, int(n)));
  const cuda::AttentionShapeDev shape{s.hp.n_head, s.hp.n_head_kv, hd, 0, s.attention_scale};
  ws = std::max(ws, cuda::attention_workspace_bytes(int64_t(n), shape, opt_.n_ctx));
  if (ws) {
    auto p = im.alloc(ws, total);
    if (!p) return Status::error("cannot allocate {} of kernel workspace", format_bytes(ws));
    im.ws = {*p, ws};
  }
  return cuda::synchronize(im.stream);
}

namespace {

struct Ops {
  CudaForward::Impl& im;
  const model::ModelSpec& spec;

  void begin_chunk(const int32_t* tokens, uint32_t n, uint32_t pos0) {
    // Host sources outlive the copies: the caller's tokens and im.host_pos stay untouched until
    // eval() synchronizes at the end of the chunk, so no wait (and no allocation) per token here.
    for (uint32_t t = 0; t < n; ++t) im.host_pos[t] = int32_t(pos0 + t);
    im.check(cuda::copy_to_device(im.d_tokens, tokens, n * sizeof(int32_t), im.stream));
    im.check(cuda::copy_to_device(im.d_pos, im.host_pos.data(), n * sizeof(int32_t), im.stream));
  }
  void embed(const int32_t*, uint32_t n, float scale, float* x) {
    im.check(cuda::get_rows(im.dev.token_embd, im.d_tokens, n, scale, x, im.stream));
  }
  void norm(const float* x, const float* w, int64_t n_vec, int64_t dim, float eps, float* out) {
    im.check(cuda::rms_norm(x, w, n_vec, dim, eps, out, im.stream));
  }
  void matmul(const kernels::WeightView& w, const float* x, uint32_t n, float* y) {
    im.check(cuda::matmul(w, x, int(n), y, im.ws, im.stream));
  }
  void rope(float* x, uint32_t n, int64_t n_heads, int64_t hd, float base, float lin, const float* freq_div,
            bool neox) {
    im.check(cuda::rope(x, im.d_pos, n, n_heads, hd, base, lin, freq_div, neox, im.stream));
  }
  void kv_write(uint32_t il, const float* k, const float* v, uint32_t n, uint32_t) {
    im.check(cuda::kv_write(k, v, im.d_pos, n, spec.kv_width(), im.kv[il].store, im.stream));
  }
  void attention(uint32_t il, const float* q, uint32_t n, const kernels::cpu::AttentionShape& s, float* out) {
    const cuda::AttentionShapeDev shape{s.n_head, s.n_head_kv, s.head_dim, s.window, s.scale};
    im.check(cuda::attention(q, im.d_pos, n, im.kv[il].store, shape, out, im.ws, im.stream));
  }
  void gated_act(model::FfnActivation act, float* gate, const float* up, int64_t count) {
    im.check(act == model::FfnActivation::gelu_tanh ? cuda::gelu_tanh_mul(gate, up, count, im.stream)
                                                    : cuda::silu_mul(gate, up, count, im.stream));
  }
  void add(float* x, const float* y, int64_t count) { im.check(cuda::add(x, y, count, im.stream)); }
};

}  // namespace

Status CudaForward::eval(std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) {
  const auto& s = model_->spec;
  const uint32_t n_vocab = s.hp.n_vocab;
  if (tokens.empty()) return Status::error("nothing to evaluate (empty token list)");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= n_vocab)
      return Status::error("token id {} at index {} is out of range (vocabulary has {} tokens)", tokens[i], i, n_vocab);
  if (uint64_t(n_past_) + tokens.size() > opt_.n_ctx)
    return Status::error("context full: {} tokens already, {} more would exceed the context of {}", n_past_,
                         tokens.size(), opt_.n_ctx);
  Impl& im = *impl_;
  im.first_error = Status();
  Ops ops{im, s};
  logits.resize(which == Logits::all ? tokens.size() * n_vocab : which == Logits::last ? n_vocab : 0);
  for (size_t done = 0; done < tokens.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(opt_.ubatch, tokens.size() - done));
    const bool last = done + n == tokens.size();
    const uint32_t rows = which == Logits::all ? n : (last && which == Logits::last ? 1 : 0);
    forward_chunk(ops, s, im.dev, im.buf, tokens.data() + done, n, n_past_, rows, im.d_logits);
    if (rows) {
      float* dst = which == Logits::all ? logits.data() + done * n_vocab : logits.data();
      im.check(cuda::copy_to_host(dst, im.d_logits, size_t(rows) * n_vocab * sizeof(float), im.stream));
    }
    im.check(cuda::synchronize(im.stream));
    if (!im.first_error.is_ok()) return im.first_error.with_context("CUDA forward");
    n_past_ += n;
    done += n;
  }
  return {};
}

}  // namespace strata::runtime
