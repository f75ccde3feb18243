#include "runtime/host_compute.h"

#include <algorithm>
#include <chrono>

#include "kernels/cpu/matmul.h"

namespace strata::runtime {

namespace cuda = kernels::cuda;

class HostCompute::Timed {
 public:
  Timed(HostCompute& h, std::string label)
      : h_(h), label_(std::move(label)), t0_(std::chrono::steady_clock::now()), trace_t0_(h.trace_ ? h.trace_->now_us() : 0) {}
  ~Timed() {
    h_.compute_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (h_.trace_) h_.trace_->span_until_now("cpu compute", std::move(label_), trace_t0_);
  }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  HostCompute& h_;
  std::string label_;
  std::chrono::steady_clock::time_point t0_;
  double trace_t0_;
};

Result<std::unique_ptr<HostCompute>> HostCompute::create(const model::ModelSpec& spec, const Options& o) {
  std::unique_ptr<HostCompute> h(new HostCompute());
  const auto& hp = spec.hp;
  h->kv_width_ = spec.kv_width();
  h->kv_index_.assign(hp.n_layer, -1);
  std::vector<kv::LayerShape> shapes;
  for (uint32_t il = 0; il < hp.n_layer && il < o.kv_host.size(); ++il) {
    if (!o.kv_host[il]) continue;
    h->kv_index_[il] = int32_t(shapes.size());
    shapes.push_back({spec.kv_width(), spec.window(il), hp.n_embd_head});
  }
  if (!shapes.empty()) {
    // margin = ubatch: a sliding layer's ring is window + ubatch slots, as on the device.
    auto kv = kv::KvCache::create(shapes, o.n_ctx, o.ubatch, o.k_type, o.v_type);
    if (!kv) return kv.status().with_context("host KV");
    h->kv_ = std::make_unique<kv::KvCache>(std::move(kv.value()));
  }
  const size_t n = o.ubatch, m = std::min(o.matmul_rows, o.ubatch);
  const size_t widest = std::max({size_t(hp.n_embd), size_t(spec.q_width()), size_t(hp.n_ff)});
  // Down: a matmul input; with host KV also q, or k and v together, of a whole chunk.
  h->in_floats_ = m * widest;
  // Up: a matmul output (the head's: n_vocab wide); with host KV an attention output.
  h->out_floats_ = m * (o.head_on_host ? std::max(widest, size_t(hp.n_vocab)) : widest);
  if (h->kv_) {
    h->in_floats_ = std::max({h->in_floats_, n * spec.q_width(), 2 * n * spec.kv_width()});
    h->out_floats_ = std::max(h->out_floats_, n * spec.q_width());
  }
  for (auto [ptr, floats] : {std::pair{&h->in_, h->in_floats_}, std::pair{&h->out_, h->out_floats_}}) {
    auto p = cuda::pinned_alloc(floats * sizeof(float));
    if (!p) return Status::error("cannot pin {} bytes of host staging for CPU-computed work: {}", floats * sizeof(float),
                                 p.message());
    *ptr = static_cast<float*>(*p);
    h->pinned_bytes_ += floats * sizeof(float);
  }
  return h;
}

HostCompute::~HostCompute() {
  // The owner synchronizes its stream before this goes (no upload still reads out_).
  if (in_) cuda::pinned_free(in_);
  if (out_) cuda::pinned_free(out_);
}

Status HostCompute::fetch(const float* d_src, size_t floats, float* host, cuda::Stream s) {
  STRATA_CHECK(floats <= in_floats_, "host staging: {} floats down, room for {}", floats, in_floats_);
  STRATA_TRY(cuda::copy_to_host(host, d_src, floats * sizeof(float), s));
  return cuda::synchronize(s);
}

Status HostCompute::matmul(const kernels::WeightView& w, const float* d_x, uint32_t n, float* d_y, cuda::Stream s,
                           const std::string& label) {
  const size_t in = size_t(n) * w.n_in, out = size_t(n) * w.n_out;
  STRATA_CHECK(in <= in_floats_ && out <= out_floats_, "host staging: {} floats down, {} up; room for {}, {}", in, out,
               in_floats_, out_floats_);
  if (cached_src_ == d_x && cached_floats_ == in) {
    // Same input as the previous matmul (wq, wk, wv): only wait until out_ is free again.
    STRATA_TRY(cuda::synchronize(s));
  } else {
    STRATA_TRY(fetch(d_x, in, in_, s));
    cached_src_ = d_x;
    cached_floats_ = in;
  }
  {
    Timed timed(*this, label);
    kernels::cpu::matmul_dot(w, in_, n, out_);
  }
  // The GPU may overwrite d_x next (e.g. q's norm in place): the cache stays valid only until the
  // owner's next device op, which calls forget_input().
  return cuda::copy_to_device(d_y, out_, out * sizeof(float), s);
}

Status HostCompute::kv_write(uint32_t il, const float* d_k, const float* d_v, const int32_t* pos, uint32_t n,
                             cuda::Stream s) {
  const size_t floats = size_t(n) * kv_width_;
  forget_input();
  STRATA_CHECK(2 * floats <= in_floats_, "host staging: {} floats of K and V, room for {}", 2 * floats, in_floats_);
  STRATA_TRY(cuda::copy_to_host(in_, d_k, floats * sizeof(float), s));
  STRATA_TRY(fetch(d_v, floats, in_ + floats, s));
  Timed timed(*this, "kv_write " + std::to_string(il));
  const uint32_t idx = uint32_t(kv_index_[il]);
  for (uint32_t t = 0; t < n; ++t)
    kv_->write(idx, uint32_t(pos[t]), in_ + size_t(t) * kv_width_, in_ + floats + size_t(t) * kv_width_);
  return Status::ok();
}

Status HostCompute::attention(uint32_t il, const float* d_q, const int32_t* pos, uint32_t n,
                              const kernels::cpu::AttentionShape& shape, float* d_out, cuda::Stream s) {
  const int64_t row = shape.n_head * shape.head_dim;
  forget_input();
  STRATA_CHECK(size_t(n) * row <= out_floats_, "host staging: {} floats of attention, room for {}", size_t(n) * row,
               out_floats_);
  STRATA_TRY(fetch(d_q, size_t(n) * row, in_, s));
  {
    Timed timed(*this, "attention " + std::to_string(il));
    kernels::cpu::attention(in_, pos, n, kv_->view(uint32_t(kv_index_[il])), shape, out_);
  }
  return cuda::copy_to_device(d_out, out_, size_t(n) * row * sizeof(float), s);
}

}  // namespace strata::runtime
