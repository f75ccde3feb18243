#include "model/arch.h"

#include <fmt/format.h>

#include "core/status.h"

namespace strata::model {
namespace {

constexpr TensorRoleInfo kRoles[] = {
    {TensorRole::token_embd, "token_embd", false, Block::embedding, false},
    {TensorRole::output_norm, "output_norm", false, Block::head, true},
    {TensorRole::output, "output", false, Block::head, false},
    {TensorRole::attn_norm, "attn_norm", true, Block::attention, true},
    {TensorRole::attn_q, "attn_q", true, Block::attention, false},
    {TensorRole::attn_k, "attn_k", true, Block::attention, false},
    {TensorRole::attn_v, "attn_v", true, Block::attention, false},
    {TensorRole::attn_output, "attn_output", true, Block::attention, false},
    {TensorRole::attn_q_norm, "attn_q_norm", true, Block::attention, true},
    {TensorRole::attn_k_norm, "attn_k_norm", true, Block::attention, true},
    {TensorRole::post_attention_norm, "post_attention_norm", true, Block::attention, true},
    {TensorRole::ffn_norm, "ffn_norm", true, Block::ffn, true},
    {TensorRole::ffn_gate, "ffn_gate", true, Block::ffn, false},
    {TensorRole::ffn_up, "ffn_up", true, Block::ffn, false},
    {TensorRole::ffn_down, "ffn_down", true, Block::ffn, false},
    {TensorRole::post_ffw_norm, "post_ffw_norm", true, Block::ffn, true},
};

}  // namespace

std::optional<Arch> arch_from_name(std::string_view name) {
  if (name == "gemma3") return Arch::gemma3;
  if (name == "llama") return Arch::llama;
  if (name == "qwen3") return Arch::qwen3;
  return std::nullopt;
}

std::string_view arch_name(Arch arch) {
  switch (arch) {
    case Arch::gemma3: return "gemma3";
    case Arch::llama: return "llama";
    case Arch::qwen3: return "qwen3";
  }
  return "?";
}

const TensorRoleInfo& role_info(TensorRole role) {
  for (const auto& r : kRoles)
    if (r.role == role) return r;
  STRATA_CHECK(false, "tensor role {} missing from the table", int(role));
  __builtin_unreachable();
}

std::vector<TensorRole> arch_roles(Arch arch, const HParams& hp) {
  using R = TensorRole;
  std::vector<R> roles = {R::token_embd, R::output_norm};
  if (!hp.tied_output) roles.push_back(R::output);
  switch (arch) {
    case Arch::gemma3:
      // gemma3: QK-norm, and norms after attention and FFN as well as before.
      roles.insert(roles.end(), {R::attn_norm, R::attn_q, R::attn_k, R::attn_v, R::attn_output,
                                 R::attn_q_norm, R::attn_k_norm, R::post_attention_norm, R::ffn_norm,
                                 R::ffn_gate, R::ffn_up, R::ffn_down, R::post_ffw_norm});
      break;
    case Arch::llama:
      roles.insert(roles.end(), {R::attn_norm, R::attn_q, R::attn_k, R::attn_v, R::attn_output,
                                 R::ffn_norm, R::ffn_gate, R::ffn_up, R::ffn_down});
      break;
    case Arch::qwen3:
      roles.insert(roles.end(), {R::attn_norm, R::attn_q, R::attn_k, R::attn_v, R::attn_output,
                                 R::attn_q_norm, R::attn_k_norm, R::ffn_norm, R::ffn_gate, R::ffn_up,
                                 R::ffn_down});
      break;
  }
  return roles;
}

std::vector<uint64_t> role_shape(TensorRole role, const HParams& hp) {
  const uint64_t q_width = uint64_t(hp.n_head) * hp.n_embd_head;
  const uint64_t kv_width = uint64_t(hp.n_head_kv) * hp.n_embd_head;
  using R = TensorRole;
  switch (role) {
    case R::token_embd: case R::output: return {hp.n_embd, hp.n_vocab};
    case R::output_norm: case R::attn_norm: case R::post_attention_norm: case R::ffn_norm:
    case R::post_ffw_norm: return {hp.n_embd};
    case R::attn_q: return {hp.n_embd, q_width};
    case R::attn_k: case R::attn_v: return {hp.n_embd, kv_width};
    case R::attn_output: return {q_width, hp.n_embd};
    case R::attn_q_norm: case R::attn_k_norm: return {hp.n_embd_head};
    case R::ffn_gate: case R::ffn_up: return {hp.n_embd, hp.n_ff};
    case R::ffn_down: return {hp.n_ff, hp.n_embd};
  }
  return {};
}

std::string tensor_name(TensorRole role, int layer) {
  const auto& info = role_info(role);
  return info.per_layer ? fmt::format("blk.{}.{}.weight", layer, info.gguf_name)
                        : fmt::format("{}.weight", info.gguf_name);
}

std::optional<NamedRole> role_from_tensor_name(std::string_view name) {
  constexpr std::string_view kSuffix = ".weight";
  if (name.size() <= kSuffix.size() || name.substr(name.size() - kSuffix.size()) != kSuffix) return std::nullopt;
  name.remove_suffix(kSuffix.size());
  int layer = -1;
  if (name.substr(0, 4) == "blk.") {
    name.remove_prefix(4);
    const size_t dot = name.find('.');
    if (dot == 0 || dot == std::string_view::npos || dot > 6) return std::nullopt;
    layer = 0;
    for (char c : name.substr(0, dot)) {
      if (c < '0' || c > '9') return std::nullopt;
      layer = layer * 10 + (c - '0');
    }
    name.remove_prefix(dot + 1);
  }
  for (const auto& r : kRoles)
    if (r.gguf_name == name && r.per_layer == (layer >= 0)) return NamedRole{r.role, layer};
  return std::nullopt;
}

std::string block_label(Block b, int layer) {
  switch (b) {
    case Block::attention: return "attn " + std::to_string(layer);
    case Block::ffn: return "ffn " + std::to_string(layer);
    case Block::head: return "head";
    case Block::embedding: return "embedding";
  }
  return "?";
}

}  // namespace strata::model
