// The host half of the CUDA engine: what runs on the CPU in the middle of a GPU forward pass.
//   - cpu-tier weight blocks (offload Tier::cpu): their matmuls run on the CPU kernels
//     (kernels/cpu/matmul.h, oneTBB inside) over the model's host mapping; the input activations
//     are copied device -> pinned host, the product pinned host -> device. No VRAM, no pinned
//     copy of the weights.
//   - host-tier KV (offload KvTier::host, M6): the layer's K/V live in a kv::KvCache in host RAM;
//     kv_write copies k and v down and stores them (quantised there when the KV type says so),
//     attention copies q down, runs kernels/cpu/attention and copies the output up.
//
// Every call takes the compute stream, waits for it (the host needs the activations the GPU has
// produced so far), computes, and enqueues the upload: the GPU resumes with the next kernel as
// soon as the copy lands. The weight store's copy stream is independent, so prefetches already
// issued for the next streamed blocks keep running while the CPU works (the overlap M5 asks for).
// Not a CUDA graph citizen: host work cannot be captured (cuda_forward.cpp runs without graphs
// when this has anything to do).
//
// Rollback: a host KV layer has the slots of the engine's sequence table (kv/sequence_table.h:
// n_ctx for full attention, a ring of window + ubatch) and entry p lives in slot p % capacity,
// exactly like the device KV, so Engine::truncate is the table's alone: positions past n_past are
// never read and are overwritten by the next writes.
//
// One instance per engine; not thread-safe. Pinned staging is sized for `matmul_rows` rows of a
// cpu-tier block and `ubatch` rows of host-KV attention.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/weight_view.h"
#include "kv/kv_cache.h"
#include "model/model_spec.h"

namespace strata::runtime {

class HostCompute {
 public:
  struct Options {
    uint32_t n_ctx = 0, ubatch = 0;  // KV positions; rows of a host-KV write or attention call
    uint32_t matmul_rows = 0;        // rows of a cpu-tier matmul at most (larger chunks use the GPU)
    GgmlType k_type = GgmlType::F32, v_type = GgmlType::F32;
    std::vector<bool> kv_host;  // per layer (empty: none)
    bool head_on_host = false;  // the head is a cpu block: the staging holds its logit rows
  };
  // Errors: pinned allocation refused, a KV type the CPU cache cannot hold.
  static Result<std::unique_ptr<HostCompute>> create(const model::ModelSpec& spec, const Options& o);
  ~HostCompute();
  HostCompute(const HostCompute&) = delete;
  HostCompute& operator=(const HostCompute&) = delete;

  bool kv_on_host(uint32_t il) const { return il < kv_index_.size() && kv_index_[il] >= 0; }
  uint64_t kv_bytes() const { return kv_ ? kv_->bytes() : 0; }
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  void set_trace(Trace* t) { trace_ = t; }
  // Host seconds spent computing (CPU matmuls, KV stores, attention), not waiting for the GPU.
  double compute_seconds() const { return compute_s_; }

  // y (device, n x w.n_out) = w (host memory) x (device, n x w.n_in), n <= matmul_rows. Every row
  // by the dot kernels (kernels::cpu::matmul_dot), so a row's result does not depend on n: a
  // verification batch gives exactly what decode steps give (speculative decoding's contract,
  // engine.h). `label` names the block in the trace.
  Status matmul(const kernels::WeightView& w, const float* d_x, uint32_t n, float* d_y, kernels::cuda::Stream s,
                const std::string& label);
  // Stores k, v (device, n x kv_width) of positions pos[0..n) in layer il's host KV.
  Status kv_write(uint32_t il, const float* d_k, const float* d_v, const int32_t* pos, uint32_t n,
                  kernels::cuda::Stream s);
  // out (device, n x n_head * head_dim) = attention of q (device) at positions pos (host) over
  // layer il's host KV. The CPU kernel computes each (query, head) on its own, so a row's result
  // does not depend on n either.
  Status attention(uint32_t il, const float* d_q, const int32_t* pos, uint32_t n, const kernels::cpu::AttentionShape& s,
                   float* d_out, kernels::cuda::Stream st);
  // The next matmul must copy its input again (a GPU op may have changed it since the last one).
  void forget_input() { cached_src_ = nullptr; }

 private:
  HostCompute() = default;
  Status fetch(const float* d_src, size_t floats, float* host, kernels::cuda::Stream s);

  std::unique_ptr<kv::KvCache> kv_;
  std::vector<int32_t> kv_index_;  // per model layer: index in kv_, or -1 (KV on the device)
  uint32_t kv_width_ = 0;
  float* in_ = nullptr;   // pinned: activations copied down (q, or k then v)
  float* out_ = nullptr;  // pinned: results copied up
  size_t in_floats_ = 0, out_floats_ = 0;
  uint64_t pinned_bytes_ = 0;
  // The last matmul's input, still valid in in_ (q, k and v read the same normed activations).
  const float* cached_src_ = nullptr;
  size_t cached_floats_ = 0;
  Trace* trace_ = nullptr;
  double compute_s_ = 0;
  // Times one piece of host work: compute_s_, and a "cpu compute" span when tracing.
  class Timed;
};

}  // namespace strata::runtime
