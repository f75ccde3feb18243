// The CPU forward pass for every supported architecture (the per-architecture differences are
// data in ModelSpec: norms, activation, RoPE style, embedding scale, sliding layers). It is the
// reference every other backend is compared against, so it computes in f32 with exact weights.
//
// One instance serves one sequence: it owns the activation scratch and writes that sequence's
// KV cache. Not thread-safe; internally parallel (oneTBB).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache.h"
#include "runtime/engine.h"
#include "runtime/model.h"

namespace strata::runtime {

class CpuForward final : public Engine {
 public:
  static Result<std::unique_ptr<CpuForward>> create(std::shared_ptr<const Model> model, ForwardOptions options);

  Status eval(std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) override;
  // Every row through the dot kernels (kernels/cpu/matmul.h matmul_dot), whatever n: the SGEMM
  // path that eval() takes from kGemmMinTokens rows sums in another order.
  Status eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                     std::vector<float>& logits) override;
  uint32_t n_past() const override { return kv_.n_tokens(); }
  void truncate(uint32_t n) override { kv_.set_n_tokens(std::min(n, kv_.n_tokens())); }
  uint32_t n_ctx() const override { return kv_.n_ctx(); }
  uint32_t ubatch() const override { return opt_.ubatch; }
  const Model& model() const override { return *model_; }
  std::string_view device_name() const override { return "cpu"; }
  const kv::KvCache& kv() const { return kv_; }

 private:
  CpuForward(std::shared_ptr<const Model> model, ForwardOptions options, kv::KvCache kv);
  void run_chunk(const int32_t* tokens, uint32_t n, uint32_t pos0, Logits which, float* logits,
                 const LayerRange* range = nullptr);

  std::shared_ptr<const Model> model_;
  ForwardOptions opt_;
  kv::KvCache kv_;
  // Activation scratch, sized for one chunk of `ubatch` tokens.
  std::vector<float> x_;    // (n, n_embd) residual stream
  std::vector<float> h_;    // (n, n_embd) normed input of a block / block output
  std::vector<float> q_;    // (n, n_head * head_dim)
  std::vector<float> k_;    // (n, n_head_kv * head_dim)
  std::vector<float> v_;    // (n, n_head_kv * head_dim)
  std::vector<float> att_;  // (n, n_head * head_dim)
  std::vector<float> gate_, up_;  // (n, n_ff)
  std::vector<int32_t> pos_;
};

}  // namespace strata::runtime
