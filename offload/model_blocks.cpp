#include "offload/model_blocks.h"

#include "core/kv_ring.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace strata::offload {

const char* kv_dtype_name(KvDtype d) {
  switch (d) {
    case KvDtype::f16: return "f16";
    case KvDtype::q8: return "q8";
    case KvDtype::q4: return "q4";
    case KvDtype::f32: return "f32";
  }
  return "?";
}

Result<KvDtype> kv_dtype_from_name(const std::string& s) {
  if (s == "f16") return KvDtype::f16;
  if (s == "q8" || s == "q8_0" || s == "int8") return KvDtype::q8;
  if (s == "q4" || s == "q4_1" || s == "int4") return KvDtype::q4;
  if (s == "f32") return KvDtype::f32;
  return Status::error("unknown KV dtype '{}' (f16, q8, q4 or f32)", s);
}

double kv_bytes_per_element(KvDtype d) {
  switch (d) {
    case KvDtype::f16: return 2.0;
    case KvDtype::q8: return (32.0 + 2.0) / 32.0;
    case KvDtype::q4: return (16.0 + 4.0) / 32.0;
    case KvDtype::f32: return 4.0;
  }
  return 2.0;
}

GgmlType WeightBlock::main_type() const {
  GgmlType best = GgmlType::F32;
  uint64_t most = 0;
  for (const auto& [t, b] : bytes_by_type)
    if (b > most) most = b, best = t;
  return best;
}

std::string WeightBlock::label() const { return model::block_label(kind, layer); }

uint64_t ModelBlocks::weight_bytes() const {
  uint64_t b = head.bytes + (tied_head ? 0 : embedding.bytes);
  for (const auto& a : attention) b += a.bytes;
  for (const auto& f : ffn) b += f.bytes;
  return b;
}

uint64_t ModelBlocks::kv_layer_bytes(uint32_t il, uint64_t ctx, KvDtype k, KvDtype v, uint32_t ring_margin) const {
  const uint64_t slots = kv_ring_slots(swa[il] ? window[il] : 0, ctx, ring_margin);
  return uint64_t(std::ceil(double(slots) * kv_bytes_per_token(k, v)));
}

std::vector<uint32_t> ModelBlocks::full_layers() const {
  std::vector<uint32_t> out;
  for (uint32_t il = 0; il < n_layer; ++il)
    if (!swa[il]) out.push_back(il);
  return out;
}

Result<ModelBlocks> model_blocks(const gguf::File& file, const model::ModelSpec& spec) {
  ModelBlocks m;
  const auto& hp = spec.hp;
  if (auto n = file.get_string("general.name", ""); n) m.name = *n;
  m.arch = std::string(model::arch_name(spec.arch));
  m.n_layer = hp.n_layer;
  m.n_embd = hp.n_embd;
  m.n_ff = hp.n_ff;
  m.n_head = hp.n_head;
  m.n_head_kv = hp.n_head_kv;
  m.head_dim = hp.n_embd_head;
  m.n_vocab = hp.n_vocab;
  m.n_ctx_train = hp.n_ctx_train;
  m.tied_head = hp.tied_output;
  m.attention.resize(hp.n_layer);
  m.ffn.resize(hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    m.swa.push_back(spec.is_swa(il));
    m.window.push_back(spec.window(il));
    m.attention[il].kind = model::Block::attention;
    m.attention[il].layer = int(il);
    m.ffn[il].kind = model::Block::ffn;
    m.ffn[il].layer = int(il);
  }
  m.head.kind = model::Block::head;
  m.embedding.kind = model::Block::embedding;
  auto add = [](WeightBlock& b, const gguf::TensorInfo& t) {
    b.bytes += t.n_bytes;
    b.params += t.n_elements;
    b.bytes_by_type[t.type] += t.n_bytes;
  };
  for (model::TensorRole role : model::arch_roles(spec.arch, hp)) {
    const auto& info = model::role_info(role);
    if (info.per_layer) {
      for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string name = model::tensor_name(role, int(il));
        const auto* t = file.find_tensor(name);
        if (!t) return Status::error("{}: tensor {} is missing", file.path(), name);
        add(info.block == model::Block::attention ? m.attention[il] : m.ffn[il], *t);
      }
    } else {
      const std::string name = model::tensor_name(role, -1);
      const auto* t = file.find_tensor(name);
      if (!t) continue;  // output.weight absent when tied
      if (info.block == model::Block::embedding) {
        add(m.embedding, *t);
        if (hp.tied_output) add(m.head, *t);  // the head multiplies by token_embd
      } else {
        add(m.head, *t);
      }
    }
  }
  if (m.embedding.bytes == 0) return Status::error("{}: token_embd.weight is missing", file.path());
  return m;
}

Result<ModelBlocks> model_blocks_from_path(const std::string& path) {
  auto f = gguf::File::open(path, {.require_data = false});
  if (!f) return f.status();
  auto spec = model::spec_from_gguf(*f);
  if (!spec) return spec.status();
  return model_blocks(*f, *spec);
}

}  // namespace strata::offload
