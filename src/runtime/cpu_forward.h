// The CPU forward pass for every supported architecture (the per-architecture differences are
// data in ModelSpec: norms, activation, RoPE style, embedding scale, sliding layers). It is the
// reference every other backend is compared against, so it computes in f32 with exact weights.
//
// One instance holds ForwardOptions::n_seq sequences, each with its own KV storage (kv::KvCache)
// and a row of the sequence table (kv/sequence_table.h: lengths, write-ahead and rollback rules,
// shared with the CUDA engine), and one activation scratch: prefill runs on one sequence at a time, eval_batch() decodes a token of
// several sequences in one pass over the weights. Not thread-safe; internally parallel (oneTBB).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/max_at.h"
#include "kernels/weight_view.h"
#include "kv/kv_cache.h"
#include "kv/sequence_table.h"
#include "runtime/engine.h"
#include "runtime/model.h"
#include "runtime/shadow_weights.h"
#include "runtime/token_tree.h"

namespace strata::runtime {

struct RowMap;  // forward_pass.h
struct CpuOps;  // cpu_ops.h

// Sees the input of every matmul of the CPU forward pass before the product: n rows of m.n_in
// floats (row-major), m the weight's view into the model mapping (m.data identifies the tensor).
// For `strata imatrix`; called on the engine's thread, between kernels.
class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  virtual void on_matmul(const kernels::WeightView& m, const float* x, uint32_t n) = 0;
};

class CpuForward final : public Engine {
 public:
  static Result<std::unique_ptr<CpuForward>> create(std::shared_ptr<const Model> model, ForwardOptions options);

  using Engine::eval;
  using Engine::n_past;
  using Engine::truncate;
  Status eval(uint32_t seq, std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) override;
  // Every row through the dot kernels (kernels/cpu/matmul.h matmul_dot), whatever n: the SGEMM
  // path that eval() takes from kGemmMinTokens rows sums in another order.
  Status eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                     std::vector<float>& logits) override;
  // The dot kernels too (rows of one matrix row are dotted while it is in cache: the weights are
  // read once per step), and per row the attention of a one-token eval over its own cache.
  Status eval_batch(std::span<const BatchRow> rows, std::vector<float>& logits) override;
  // The dot kernels as eval_layers; per layer, attention by runs of rows that share their
  // position's offset from their slot (runtime/token_tree.h: a chain is one run), so each row's
  // window starts where a one-token eval at its position starts.
  Status eval_tree(std::span<const int32_t> tokens, std::span<const int32_t> parents, uint32_t pos0,
                   const LayerRange& r, Logits which, std::vector<float>& logits) override;
  Status keep_tree_path(uint32_t pos0, std::span<const uint32_t> path) override;
  bool supports_trees() const override { return true; }
  bool supports_draft_window() const override { return true; }
  Status make_shadow(GgmlType type) override;
  std::optional<GgmlType> shadow_type() const override {
    return shadow_ ? std::optional<GgmlType>(shadow_->type) : std::nullopt;
  }
  uint64_t shadow_bytes() const override { return shadow_ ? shadow_->bytes : 0; }
  uint32_t n_seq() const override { return seqs_.n_seq(); }
  uint32_t n_past(uint32_t seq) const override { return seqs_.length(seq); }
  void truncate(uint32_t seq, uint32_t n) override {
    seqs_.truncate(seq, n);
    tree_.reset();
  }
  uint64_t kv_bytes_per_seq() const override { return kv_.front().bytes(); }
  int32_t last_argmax() const override { return last_argmax_; }
  uint32_t n_ctx() const override { return kv_.front().n_ctx(); }
  uint32_t ubatch() const override { return opt_.ubatch; }
  const Model& model() const override { return *model_; }
  std::string_view device_name() const override { return "cpu"; }
  // nullptr (the default) turns it off; the observer must outlive the evals it sees.
  void set_matmul_observer(MatmulObserver* o) { observer_ = o; }
  const kv::KvCache& kv(uint32_t seq = 0) const {
    STRATA_CHECK(seq < kv_.size(), "sequence {} of {}", seq, kv_.size());
    return kv_[seq];
  }

 private:
  CpuForward(std::shared_ptr<const Model> model, ForwardOptions options, std::vector<kv::KvCache> kv);
  // exact: every matmul by the dot kernels (eval_layers, eval_batch). tree: eval_tree's rows.
  // head_max: where set, a one-row head's maximum (CpuOps::head_max); returns whether it was taken.
  bool run_chunk(const int32_t* tokens, uint32_t n, const RowMap& map, Logits which, float* logits,
                 const LayerRange* range, bool exact, const TreeRows* tree = nullptr,
                 kernels::cpu::MaxAt* head_max = nullptr);
  // A layer-major group of n tokens of one sequence (ForwardOptions::prefill_group_tokens).
  bool run_group(const int32_t* tokens, uint32_t n, uint32_t seq, uint32_t pos0, bool head_last, float* logits,
                 kernels::cpu::MaxAt* head_max);

  std::shared_ptr<const Model> model_;
  std::optional<ShadowWeights> shadow_;  // make_shadow's copies, for LayerRange::shadow
  ForwardOptions opt_;
  kv::SequenceTable seqs_;       // lengths and KV rules of every sequence
  std::vector<kv::KvCache> kv_;  // per sequence: the storage
  // Activation scratch, sized for one chunk of `ubatch` tokens.
  std::vector<float> x_;    // (n, n_embd) residual stream
  std::vector<float> h_;    // (n, n_embd) normed input of a block / block output
  std::vector<float> q_;    // (n, n_head * head_dim)
  std::vector<float> k_;    // (n, n_head_kv * head_dim)
  std::vector<float> v_;    // (n, n_head_kv * head_dim)
  std::vector<float> att_;  // (n, n_head * head_dim)
  std::vector<float> gate_, up_;  // (n, n_ff)
  // Int8 activations quantised by their producer for the next matmul (CpuOps::q8_room): room for
  // (min(n, kMaxExactRows), max(q_width, n_ff)), 64 bytes of slack for the alignment.
  std::vector<uint8_t> q8_act_;
  std::vector<int32_t> pos_;        // per row of a chunk or a layer-major group
  std::vector<float> x_group_;      // (prefill_group_tokens, n_embd) a group's residual streams
  std::vector<uint32_t> row_seqs_;  // eval_batch: per row
  MatmulObserver* observer_ = nullptr;
  // The last eval_tree()'s tree and pos0, for keep_tree_path: cleared when a path is kept and by
  // every other call that writes KV or moves a length (its slots may no longer hold the tree).
  std::optional<TreeShape> tree_;
  uint32_t tree_pos0_ = 0;
  int32_t last_argmax_ = -1;  // last_argmax(): set by eval(Logits::last), -1 after every other call
};

}  // namespace strata::runtime
