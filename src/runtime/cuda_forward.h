// The GPU forward pass: the KV cache and activations in VRAM, each weight block resident or streamed
// (options.placement, offload/placement.h; streamed blocks through offload/weight_store.h) through a VRAM staging ring; the
// same forward_pass.h as the CPU engine over the CUDA kernels (kernels/cuda/cuda_api.h). Weights
// are uploaded (or pinned, when streamed) once at create().
//
// One instance holds ForwardOptions::n_seq sequences, each with its own KV storage in VRAM (all
// allocated at create(), inside the VRAM budget, with the slots the sequence table gives) and a row
// of the sequence table (kv/sequence_table.h: lengths, write-ahead and rollback rules, shared with
// the CPU engine), and one activation scratch. Not thread-safe.
// All work runs on one CUDA stream; eval() returns when the logits are on the host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/sequence_table.h"
#include "runtime/engine.h"
#include "runtime/model.h"

namespace strata::runtime {

class CudaForward final : public Engine {
 public:
  // Errors: no CUDA device / built without CUDA, a weight type without CUDA kernels (naming the
  // tensor), VRAM allocation refused (with the size asked).
  static Result<std::unique_ptr<CudaForward>> create(std::shared_ptr<const Model> model, ForwardOptions options);
  // The first weight matrix of a type the CUDA kernels cannot compute (the i-quants, for now), or
  // null: create() refuses such a model, make_engine(automatic) runs it on the CPU.
  static const gguf::TensorInfo* unsupported_tensor(const Model& model);
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  using Engine::eval;
  using Engine::n_past;
  using Engine::truncate;
  Status eval(uint32_t seq, std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) override;
  // Multi-column GEMV (n <= kMaxExactRows) and, per row, the one-query attention call a decode
  // step makes (the multi-query attention tiles keys by the batch's positions: another summation
  // order). Replayed as a CUDA graph of its shape where it can be (the same kernels either way).
  Status eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                     std::vector<float>& logits) override;
  // Multi-column GEMV over all rows, then per row the KV write and one-query attention call of a
  // decode step on the row's own cache (as eval_layers); a graph of its shape as eval_layers. A
  // single row runs as eval() of its sequence.
  Status eval_batch(std::span<const BatchRow> rows, std::vector<float>& logits) override;
  // Token trees (engine.h): each node is computed as the decode step of its root-to-node path
  // (RoPE at its path position, attention reading its ancestors' slots: attention_tree.h
  // TreePathDev), so its row equals that step bit for bit; one attention launch per layer for all
  // the nodes, each block one node's; the step replayed as a CUDA graph per node count
  // (STRATA_TREE_GRAPHS=0: eagerly). keep_tree_path moves the kept rows on the device. Needs
  // flash-decoding KV (f16, q8_0, q4_1; head_dim 32, 64, 128, 256) and no host KV or cpu-tier
  // blocks: supports_trees().
  Status eval_tree(std::span<const int32_t> tokens, std::span<const int32_t> parents, uint32_t pos0,
                   const LayerRange& r, Logits which, std::vector<float>& logits) override;
  Status keep_tree_path(uint32_t pos0, std::span<const uint32_t> path) override;
  bool supports_trees() const override;
  bool supports_draft_window() const override;
  uint32_t n_seq() const override { return seqs_.n_seq(); }
  uint32_t n_past(uint32_t seq) const override { return seqs_.length(seq); }
  void truncate(uint32_t seq, uint32_t n) override;
  uint64_t kv_bytes_per_seq() const override;
  uint32_t n_ctx() const override { return opt_.n_ctx; }
  uint32_t ubatch() const override { return opt_.ubatch; }
  const Model& model() const override { return *model_; }
  std::string_view device_name() const override { return "cuda"; }
  uint64_t device_bytes() const { return device_bytes_; }  // everything this engine allocated
  uint64_t vram_peak_bytes() const override { return device_bytes_; }
  uint64_t streamed_bytes() const override;
  // The staging ring is one two-ended buffer (ForwardOptions::shared_ring, where it was smaller).
  bool shared_ring() const;
  std::vector<uint8_t> non_resident_layers() const override;
  uint64_t disk_bytes() const override;
  // CUDA graphs of step shapes captured and launched so far (cuda_step_graphs.h).
  struct GraphStats {
    uint64_t captures = 0, launches = 0;
  };
  GraphStats graph_stats() const;
  uint64_t graph_captures() const override { return graph_stats().captures; }
  int32_t last_argmax() const override { return last_argmax_; }
  // Host seconds spent computing cpu-tier blocks and host-KV attention so far (0 without them).
  double host_compute_seconds() const override;

  struct Impl;  // device state (cuda_forward.cpp)

 private:
  CudaForward(std::shared_ptr<const Model> model, ForwardOptions options);
  Status allocate();

  std::shared_ptr<const Model> model_;
  ForwardOptions opt_;
  kv::SequenceTable seqs_;  // lengths and KV rules of every sequence (storage: Impl::kv)
  int32_t last_argmax_ = -1;  // last_argmax(): set by eval(Logits::last), -1 after every other call
  uint64_t device_bytes_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::runtime
