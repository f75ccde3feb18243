// The CPU forward pass for every supported architecture (the per-architecture differences are
// data in ModelSpec: norms, activation, RoPE style, embedding scale, sliding layers). It is the
// reference every other backend is compared against, so it computes in f32 with exact weights.
//
// One instance serves one sequence: it owns the activation scratch and writes that sequence's
// KV cache. Not thread-safe; internally parallel (oneTBB).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache.h"
#include "runtime/model.h"

namespace strata::runtime {

struct ForwardOptions {
  uint32_t n_ctx = 4096;           // KV positions
  uint32_t ubatch = 512;           // tokens per prefill chunk (also the ring margin)
  GgmlType kv_type = GgmlType::F32;
};

enum class Logits { none, last, all };

class CpuForward {
 public:
  static Result<std::unique_ptr<CpuForward>> create(std::shared_ptr<const Model> model, ForwardOptions options);

  // Runs `tokens` at positions [n_past(), n_past() + tokens.size()), appending to the KV cache.
  // logits receives n_vocab floats for the last token (Logits::last) or for every token
  // (Logits::all, row-major). Errors: token id out of range, context full.
  Status eval(std::span<const int32_t> tokens, Logits which, std::vector<float>& logits);

  uint32_t n_past() const { return kv_.n_tokens(); }
  // Forgets positions >= n (speculative rollback, or restarting a sequence with n = 0).
  void truncate(uint32_t n) { kv_.set_n_tokens(n); }
  const Model& model() const { return *model_; }
  const kv::KvCache& kv() const { return kv_; }

 private:
  CpuForward(std::shared_ptr<const Model> model, ForwardOptions options, kv::KvCache kv);
  void run_chunk(const int32_t* tokens, uint32_t n, uint32_t pos0, Logits which, float* logits);

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
