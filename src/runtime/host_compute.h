// The host half of the CUDA engine: what runs on the CPU in the middle of a GPU forward pass.
//   - cpu-tier weight blocks (offload Tier::cpu): an FFN block runs whole on the CPU (ffn(): the
//     residual stream copied down, norm, gate/up, activation, down, post-norm and residual add
//     through the CPU engine's own ops, runtime/cpu_ops.h, then copied up: one round trip per
//     block); an attention block's matrices one by one (matmul(); its attention runs where its KV
//     is). Weights are read from the model's host mapping: no VRAM, no pinned copy. Decode-sized
//     calls (<= matmul_rows rows) use the int8-activation kernels (kernels/cpu/gemv_q8.h) where
//     Options::int8 says so, as the GPU's GEMV does; otherwise the exact f32 dot kernels.
//   - host-tier KV (offload KvTier::host, M6): the layer's K/V live in a kv::KvCache in host RAM;
//     kv_write copies k and v down and stores them (quantised there when the KV type says so),
//     attention copies q down, runs kernels/cpu/attention and copies the output up.
//
// Stream-ordered: every call enqueues on the compute stream a copy down, a host function (the CPU
// work, run by CUDA's host-callback thread once the copy has landed; oneTBB spreads it over the
// cores) and a copy up, and returns at once. The GPU resumes with the next kernel as soon as the
// copy up lands; the enqueuing thread never waits, so it launches the rest of the step meanwhile,
// and the same calls inside a stream capture become graph nodes (host nodes), so a step with host
// work replays as a CUDA graph like any other (STRATA_HOST_GRAPHS=0: eagerly, cuda_step_graphs.h).
// The weight store's copy stream is independent, so prefetches of the next streamed blocks keep
// running while the CPU works (the overlap M5 asks for). The copy up is a kernel reading the
// mapped staging (cuda_api.h copy_by_kernel): on the copy engine it queued behind those
// prefetches, and the step waited a whole block copy per piece of host work (27B, --vram 12GiB,
// 27 cpu-tier attention blocks, H100 host: 22.9 tok/s by copy engine vs 29.4 by kernel, eager;
// the CPU's time with a copy in flight rose from 30% to 72%).
// Each distinct call (kind, matrix or layer, rows, positions) keeps one task object for the life
// of the engine: a graph replays the same pointer, and positions are read when the task runs (the
// caller's host position array is refreshed before each step, eager or graph).
//
// Rollback: a host KV layer has the slots of the engine's sequence table (kv/sequence_table.h:
// n_ctx for full attention, a ring of window + ubatch) and entry p lives in slot p % capacity,
// exactly like the device KV, so Engine::truncate is the table's alone: positions past n_past are
// never read and are overwritten by the next writes.
//
// One instance per engine; calls come from one thread. Pinned staging is sized for `matmul_rows`
// rows of a cpu-tier block and `ubatch` rows of host-KV attention; the owner synchronizes the stream
// (and destroys graphs holding its tasks) before destroying it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/weight_view.h"
#include "kv/kv_cache.h"
#include "model/model_spec.h"
#include "model/model_weights.h"

namespace strata::runtime {

class HostCompute {
 public:
  struct Options {
    uint32_t n_ctx = 0, ubatch = 0;  // KV positions; rows of a host-KV write or attention call
    uint32_t matmul_rows = 0;        // rows of a cpu-tier block at most (larger chunks use the GPU)
    GgmlType k_type = GgmlType::F32, v_type = GgmlType::F32;
    std::vector<bool> kv_host;  // per layer (empty: none)
    bool head_on_host = false;  // the head is a cpu block: the staging holds its logit rows
    bool int8 = false;          // int8-activation CPU kernels for cpu-tier matrices (ForwardOptions::cpu_int8)
    // The model's host weights (ffn() reads its norms and matrices); must outlive this object.
    const model::ModelWeights* weights = nullptr;
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
  // Host seconds spent computing (CPU matmuls, FFN blocks, KV stores, attention), not waiting for
  // the GPU. Read it after the stream has been synchronized.
  double compute_seconds() const { return double(compute_ns_.load(std::memory_order_relaxed)) * 1e-9; }

  // y (device, n x w.n_out) = w (host memory) x (device, n x w.n_in), n <= matmul_rows. A row's
  // result does not depend on n (int8 or dot kernels, row by row), so a verification batch gives
  // exactly what decode steps give (speculative decoding's contract, engine.h). `label` names the
  // block in the trace.
  Status matmul(const kernels::WeightView& w, const float* d_x, uint32_t n, float* d_y, kernels::cuda::Stream s,
                const std::string& label);
  // x (device, n x n_embd) += layer il's FFN block of x, post-norm included (forward_pass.h ffn_rows
  // + add_block_output on the CPU), n <= matmul_rows. Per row, as matmul.
  Status ffn(uint32_t il, float* d_x, uint32_t n, kernels::cuda::Stream s, const std::string& label);
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
  // One piece of host work, enqueued as a host function (its address is the function's argument).
  struct Task {
    HostCompute* owner = nullptr;
    std::string label;                // the trace span's name
    std::function<void()> work;
  };
  static void run_task(void* task);
  enum class Kind { matmul, ffn, kv_write, attention };
  // (kind, matrix or positions, rows, layer): one task per distinct call.
  using TaskKey = std::tuple<Kind, const void*, uint32_t, uint32_t>;
  // Enqueues the task for `key` on s; the first call for a key stores `work` (every call with that
  // key does the same work: the key holds all it depends on).
  Status enqueue(kernels::cuda::Stream s, const TaskKey& key, const std::string& label, std::function<void()> work);

  const model::ModelSpec* spec_ = nullptr;
  const model::ModelWeights* weights_ = nullptr;
  bool int8_ = false;
  uint32_t matmul_rows_ = 0;
  std::unique_ptr<kv::KvCache> kv_;
  std::vector<int32_t> kv_index_;  // per model layer: index in kv_, or -1 (KV on the device)
  uint32_t kv_width_ = 0;
  float* in_ = nullptr;   // pinned: activations copied down (q, or k then v; an FFN block's x, updated in place)
  float* out_ = nullptr;  // pinned: results copied up
  // Their device addresses (mapped pinned memory): results go up by a kernel reading them, not by
  // a copy engine, where the streamed blocks' copies would hold them back (cuda_api.h
  // copy_by_kernel); null where mapping failed or STRATA_HOST_UPLOAD=copy (same-run comparisons).
  const float* in_dev_ = nullptr;
  const float* out_dev_ = nullptr;
  // Copies n floats from the staging (in_ or out_, at `host`) to d_dst on s.
  Status upload(float* d_dst, const float* host, size_t floats, kernels::cuda::Stream s) const;
  size_t in_floats_ = 0, out_floats_ = 0;
  uint64_t pinned_bytes_ = 0;
  // An FFN block's scratch (host, pageable: never copied): normed input, gate, up.
  std::vector<float> ffn_h_, ffn_gate_, ffn_up_;
  std::vector<uint8_t> ffn_q8_;  // CpuOps::q8_room: the gated activation's int8 codes for the down matmul
  // CpuOps wants a KV and positions; an FFN block touches neither.
  std::vector<kv::KvCache> no_kv_;
  std::vector<int32_t> no_pos_;
  // The last matmul's input, still valid in in_ (q, k and v read the same normed activations).
  const float* cached_src_ = nullptr;
  size_t cached_floats_ = 0;
  std::map<TaskKey, std::unique_ptr<Task>> tasks_;
  Trace* trace_ = nullptr;
  std::atomic<uint64_t> compute_ns_{0};
};

}  // namespace strata::runtime
