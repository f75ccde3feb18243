#include "runtime/host_compute.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/matmul.h"
#include "runtime/cpu_ops.h"
#include "runtime/engine.h"

namespace strata::runtime {

namespace cuda = kernels::cuda;

Result<std::unique_ptr<HostCompute>> HostCompute::create(const model::ModelSpec& spec, const Options& o) {
  std::unique_ptr<HostCompute> h(new HostCompute());
  const auto& hp = spec.hp;
  h->spec_ = &spec;
  h->weights_ = o.weights;
  h->int8_ = o.int8;
  h->matmul_rows_ = std::min(o.matmul_rows, o.ubatch);
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
  const size_t n = o.ubatch, m = h->matmul_rows_;
  const size_t widest = std::max({size_t(hp.n_embd), size_t(spec.q_width()), size_t(hp.n_ff)});
  // Down: a matmul input or an FFN block's x; with host KV also q, or k and v together, of a chunk.
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
  const char* up = std::getenv("STRATA_HOST_UPLOAD");
  if (!(up && std::string(up) == "copy")) {
    auto din = cuda::mapped_device_pointer(h->in_), dout = cuda::mapped_device_pointer(h->out_);
    if (din && dout) h->in_dev_ = static_cast<const float*>(*din), h->out_dev_ = static_cast<const float*>(*dout);
  }
  if (o.weights) {
    h->ffn_h_.resize(m * hp.n_embd);
    h->ffn_gate_.resize(m * hp.n_ff);
    h->ffn_up_.resize(m * hp.n_ff);
    // Room for the down projection's int8 input, quantised in the gate/up job (CpuOps::gated_matmuls).
    if (h->int8_ && hp.n_ff % kernels::cpu::kQ8Group == 0)
      h->ffn_q8_.resize(kernels::cpu::q8_act_bytes(int64_t(hp.n_ff), std::min<size_t>(m, kMaxExactRows)) + 64);
  }
  return h;
}

HostCompute::~HostCompute() {
  // The owner synchronizes its stream before this goes (no upload still reads out_, no task runs).
  if (in_) cuda::pinned_free(in_);
  if (out_) cuda::pinned_free(out_);
}

Status HostCompute::upload(float* d_dst, const float* host, size_t floats, cuda::Stream s) const {
  const size_t bytes = floats * sizeof(float);
  if (in_dev_ && host >= in_ && host < in_ + in_floats_)
    return cuda::copy_by_kernel(d_dst, in_dev_ + (host - in_), bytes, s);
  if (out_dev_ && host >= out_ && host < out_ + out_floats_)
    return cuda::copy_by_kernel(d_dst, out_dev_ + (host - out_), bytes, s);
  return cuda::copy_to_device(d_dst, host, bytes, s);
}

void HostCompute::run_task(void* p) {
  auto* t = static_cast<Task*>(p);
  HostCompute& h = *t->owner;
  const double trace_t0 = h.trace_ ? h.trace_->now_us() : 0;
  const auto t0 = std::chrono::steady_clock::now();
  t->work();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  h.compute_ns_.fetch_add(uint64_t(ns), std::memory_order_relaxed);
  if (h.trace_) h.trace_->span_until_now("cpu compute", t->label, trace_t0);
}

Status HostCompute::enqueue(cuda::Stream s, const TaskKey& key, const std::string& label, std::function<void()> work) {
  auto& slot = tasks_[key];
  if (!slot) slot.reset(new Task{this, label, std::move(work)});
  return cuda::launch_host_func(s, &HostCompute::run_task, slot.get());
}

Status HostCompute::matmul(const kernels::WeightView& w, const float* d_x, uint32_t n, float* d_y, cuda::Stream s,
                           const std::string& label) {
  const size_t in = size_t(n) * w.n_in, out = size_t(n) * w.n_out;
  STRATA_CHECK(in <= in_floats_ && out <= out_floats_ && n <= matmul_rows_,
               "host staging: {} floats down, {} up, {} rows; room for {}, {}, {}", in, out, n, in_floats_, out_floats_,
               matmul_rows_);
  // Same input as the previous matmul (wq, wk, wv): in_ still holds it (stream order).
  if (cached_src_ != d_x || cached_floats_ != in) {
    STRATA_TRY(cuda::copy_to_host(in_, d_x, in * sizeof(float), s));
    cached_src_ = d_x;
    cached_floats_ = in;
  }
  const kernels::WeightView* wp = &w;
  const bool int8 = int8_ && kernels::cpu::has_dot_q8(w.type);
  STRATA_TRY(enqueue(s, {Kind::matmul, wp, n, 0}, label, [this, wp, n, int8] {
    if (int8) kernels::cpu::matmul_q8(*wp, in_, n, out_);
    else kernels::cpu::matmul_dot(*wp, in_, n, out_);
  }));
  // The GPU may overwrite d_x next (e.g. q's norm in place): the cache stays valid only until the
  // owner's next device op, which calls forget_input().
  return upload(d_y, out_, out, s);
}

Status HostCompute::ffn(uint32_t il, float* d_x, uint32_t n, cuda::Stream s, const std::string& label) {
  const size_t floats = size_t(n) * spec_->hp.n_embd;
  STRATA_CHECK(weights_ && n <= matmul_rows_ && floats <= in_floats_, "host FFN block: {} rows, room for {}", n,
               weights_ ? matmul_rows_ : 0);
  forget_input();
  STRATA_TRY(cuda::copy_to_host(in_, d_x, floats * sizeof(float), s));
  STRATA_TRY(enqueue(s, {Kind::ffn, nullptr, n, il}, label, [this, il, n] {
    CpuOps ops{*weights_, no_kv_, no_pos_, nullptr, 0, nullptr, /*exact=*/true, {}};
    ops.int8 = int8_;
    ops.use_q8_room(ffn_q8_);
    const ForwardBuffers b{in_, ffn_h_.data(), nullptr, nullptr, nullptr, nullptr, ffn_gate_.data(), ffn_up_.data()};
    ffn_rows(ops, *spec_, *weights_, b, il, n);
    add_block_output(ops, *spec_, weights_->layers[il].post_ffw_norm, b, n);
  }));
  return upload(d_x, in_, floats, s);
}

Status HostCompute::kv_write(uint32_t il, const float* d_k, const float* d_v, const int32_t* pos, uint32_t n,
                             cuda::Stream s) {
  const size_t floats = size_t(n) * kv_width_;
  forget_input();
  STRATA_CHECK(2 * floats <= in_floats_, "host staging: {} floats of K and V, room for {}", 2 * floats, in_floats_);
  STRATA_TRY(cuda::copy_to_host(in_, d_k, floats * sizeof(float), s));
  STRATA_TRY(cuda::copy_to_host(in_ + floats, d_v, floats * sizeof(float), s));
  const uint32_t idx = uint32_t(kv_index_[il]);
  return enqueue(s, {Kind::kv_write, pos, n, il}, "kv_write " + std::to_string(il), [this, idx, pos, n, floats] {
    for (uint32_t t = 0; t < n; ++t)
      kv_->write(idx, uint32_t(pos[t]), in_ + size_t(t) * kv_width_, in_ + floats + size_t(t) * kv_width_);
  });
}

Status HostCompute::attention(uint32_t il, const float* d_q, const int32_t* pos, uint32_t n,
                              const kernels::cpu::AttentionShape& shape, float* d_out, cuda::Stream s) {
  const int64_t row = shape.n_head * shape.head_dim;
  forget_input();
  STRATA_CHECK(size_t(n) * row <= out_floats_ && size_t(n) * row <= in_floats_,
               "host staging: {} floats of attention, room for {}", size_t(n) * row, std::min(in_floats_, out_floats_));
  STRATA_TRY(cuda::copy_to_host(in_, d_q, size_t(n) * row * sizeof(float), s));
  const uint32_t idx = uint32_t(kv_index_[il]);
  STRATA_TRY(enqueue(s, {Kind::attention, pos, n, il}, "attention " + std::to_string(il), [this, idx, pos, n, shape] {
    kernels::cpu::attention(in_, pos, n, kv_->view(idx), shape, out_);
  }));
  return upload(d_out, out_, size_t(n) * row, s);
}

}  // namespace strata::runtime
